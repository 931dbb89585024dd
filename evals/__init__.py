"""Offline evaluations (``make eval-routing``): labelled sets and the runners that score taskyard against them."""
