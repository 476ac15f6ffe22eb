"""Human-readable notifications on the operations SNS topic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from fleetops.aws import clients

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient

logger = Logger(child=True)

_SUBJECT_MAX = 100  # SNS limit; no line breaks allowed either


class Notifier:
    """Publish to the operations topic; without a topic (local runs) the message is only logged.

    Examples
    --------
    >>> class Sns:  # in-memory stand-in: keeps what was published
    ...     def __init__(self):
    ...         self.subjects = []
    ...     def publish(self, TopicArn, Subject, Message):
    ...         self.subjects.append(Subject)
    ...         return {"MessageId": f"message-{len(self.subjects)}"}
    >>> sns = Sns()
    >>> notifier = Notifier("arn:aws:sns:us-east-1:123456789012:ops", client=sns)
    >>> notifier.publish("[ALARM] queue-depth on manga-chat/primary", "what fired, what was done, where to look")
    'message-1'
    >>> notifier.publish("[ALARM] " + "very long " * 20, "...")
    'message-2'
    >>> len(sns.subjects[1]), sns.subjects[1][-3:]  # cut to the SNS limit
    (100, '...')
    >>> Notifier("").publish("[ALARM] queue-depth on manga-chat/primary", "...") is None  # no topic: only logged
    True
    """

    def __init__(self, topic_arn: str, client: SNSClient | None = None) -> None:
        self._topic_arn = topic_arn
        self._client = (client or clients.client("sns")) if topic_arn else client

    def publish(self, subject: str, message: str) -> str | None:
        """Send one message; returns the SNS message id (``None`` when no topic is configured)."""
        clean = " ".join(subject.split())
        if len(clean) > _SUBJECT_MAX:
            clean = clean[: _SUBJECT_MAX - 3] + "..."
        if not self._topic_arn or self._client is None:
            logger.info("no notification topic configured; notification only logged", extra={"subject": clean})
            return None
        answer = self._client.publish(TopicArn=self._topic_arn, Subject=clean, Message=message)
        return str(answer["MessageId"])
