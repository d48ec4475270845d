"""Pinned versions of the connector artifacts; `package_plugins.sh` and the docs quote these.

MSK Connect runs Kafka Connect 3.7.x on Java 17 (and 2.7.1 on Java 11). Debezium 2.7 is built
against Kafka 3.7 and needs Java 11+, so 2.7.x runs on the 3.7.x runtime; Debezium 3.x needs
Java 17 and Kafka 3.8+ clients and is not yet the safe choice there. Debezium Server uses the
same Debezium minor line so both captures emit identical events.
"""

from __future__ import annotations

KAFKA_CONNECT_VERSION = "3.7.x"  # MSK Connect runtime (Java 17)
DEBEZIUM_VERSION = "2.7.4.Final"
CONFLUENT_S3_SINK_VERSION = "10.5.17"
MSK_CONFIG_PROVIDERS_VERSION = "0.1.0"  # the release the MSK Connect tutorial documents

DEBEZIUM_PLUGIN_ZIP = f"debezium-connector-postgres-{DEBEZIUM_VERSION}.zip"
S3_SINK_PLUGIN_ZIP = f"confluentinc-kafka-connect-s3-{CONFLUENT_S3_SINK_VERSION}.zip"
