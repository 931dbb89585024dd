"""The ``webhook`` of a submission as a model: its URL rules and its events."""

import pytest
from pydantic import ValidationError

from taskyard_api.webhooks.documents import EVENT_ORDER, WebhookRequest
from taskyard_common.webhooks import WEBHOOK_EVENTS


def test_the_events_are_the_terminal_statuses_of_the_shared_rules():
    assert EVENT_ORDER == WEBHOOK_EVENTS


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/taskyard",
        "HTTP://Hooks.Example.com:8080/a?token=x#frag",
        "http://[2606:4700::1111]/x",
        "https://xn--exmple-cua.com/",
        "https://10.0.0.1/x",  # the address rules need the settings: checked at submission, not here
    ],
)
def test_valid_urls(url):
    assert WebhookRequest(url=url).url == url


@pytest.mark.parametrize(
    "url",
    [
        "",
        "mailto:a@b.c",
        "//hooks.example.com/x",
        "https://:443/x",
        "https://a@b.example.com/",
        "http://h:0/",
    ],
)
def test_invalid_urls(url):
    with pytest.raises(ValidationError):
        WebhookRequest(url=url)
