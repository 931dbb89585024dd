"""The agent evaluation (``make eval-agent``): a labelled set of end-to-end tasks for the shipped
specialists, run through the real pipeline (API, broker agent, workers) and graded by automatic checks."""
