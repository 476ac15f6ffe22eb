"""The emulated account and region (moto's defaults), apart from the emulator so that reading a template for them
needs neither moto nor requests (an installed fleetctl reads templates and has neither)."""

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"  # moto's default account
