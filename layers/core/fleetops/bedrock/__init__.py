"""Bedrock Custom Model Import: artifact rules, request/plan models, smoke-test verdicts and thin adapters."""
