"""The local capture stack: PostgreSQL, Kafka (KRaft), Kafka Connect and a moto S3 on 127.0.0.1.

``cdclake local up | status | reconcile | down``; see docs/local-stack.md.
"""
