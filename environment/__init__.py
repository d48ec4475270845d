"""The foundation: an environment's typed config (``config/<env>.yaml``) and everything derived
from it without the CDK, Spark or boto3. Every other layer imports it; it imports none of them."""
