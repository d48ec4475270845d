"""The local stack's Kafka: one broker in KRaft mode (its own controller), as MSK runs it.

Its metadata and log dirs live in ``kafka/`` of the state folder, beside ``server.properties``;
its output in ``logs/kafka.log`` and every authorization decision in
``logs/kafka-authorizer.log`` (what MSK's IAM would check; tests/iam reads it).
"""

from __future__ import annotations

import base64
import subprocess
import uuid

from cdclake.local import processes
from cdclake.local.processes import StackError, Tracked
from cdclake.local.runtime import JVM_OPTS, StackHandle, State, java_binary, jvm_lib
from connectors.configs import render_properties

# log4j 1 settings of both Kafka JVMs: the broker and the Connect worker.
LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.reflections=ERROR
log4j.logger.org.apache.kafka.clients=WARN
# Sinks subscribe to topics of tables that do not exist yet; one warning a second each.
log4j.logger.org.apache.kafka.clients.NetworkClient=ERROR
log4j.logger.kafka.server.KafkaConfig=WARN
"""
# The broker's authorization decisions, one line each, in a bounded file of their own: what the
# connectors do to which topic and group, as MSK's IAM authorizer would see it (tests/iam checks
# them against the capture stack's kafka-cluster statements). TRACE: the broker logs some allowed
# checks (an idempotent producer's IDEMPOTENT_WRITE) only at that level.
AUTHORIZER_LOG = "kafka-authorizer"
AUTHORIZER_LOG4J = """\
log4j.logger.kafka.authorizer.logger=TRACE, authorizer
log4j.additivity.kafka.authorizer.logger=false
log4j.appender.authorizer=org.apache.log4j.RollingFileAppender
log4j.appender.authorizer.File={path}
log4j.appender.authorizer.MaxFileSize=20MB
log4j.appender.authorizer.MaxBackupIndex=1
log4j.appender.authorizer.layout=org.apache.log4j.PatternLayout
log4j.appender.authorizer.layout.ConversionPattern=[%d] %m%n
"""


def start(stack: StackHandle, state: State) -> Tracked:
    """The broker on ``state.ports["kafka"]``, its controller on ``"kafka_controller"``.

    Its storage is formatted (a new cluster id) the first time only.
    """
    lib = jvm_lib("kafka")
    base = stack.root / "kafka"
    base.mkdir(parents=True, exist_ok=True)
    port, controller = state.ports["kafka"], state.ports["kafka_controller"]
    # MSK's broker defaults that matter to Connect: no auto-created topics.
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(base / "data"),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "5",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        # MSK authorizes every request (with IAM); here Kafka's own authorizer allows all
        # (there are no ACLs) and logs each decision, so the log shows what IAM would check.
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    server = base / "server.properties"
    server.write_text(render_properties(properties))
    log4j = base / "log4j.properties"
    log4j.write_text(LOG4J + AUTHORIZER_LOG4J.format(path=stack.log_path(AUTHORIZER_LOG)))
    classpath = f"{lib}/*"
    java = java_binary()
    if not (base / "data" / "meta.properties").exists():
        # Kafka's own ids never start with '-' (the tool would read one as an option).
        cluster_id = "-"
        while cluster_id.startswith("-"):
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        formatted = subprocess.run(
            [
                java,
                *JVM_OPTS,
                f"-Dlog4j.configuration=file:{log4j}",
                "-cp",
                classpath,
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id,
                "-c",
                str(server),
            ],
            capture_output=True,
            text=True,
        )
        if formatted.returncode != 0:
            raise StackError(f"formatting Kafka's KRaft storage failed:\n{formatted.stderr}")
    proc = processes.spawn(
        "kafka",
        [
            java,
            *JVM_OPTS,
            f"-Dlog4j.configuration=file:{log4j}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(server),
        ],
        log=stack.log_path("kafka"),
    )
    processes.wait_for("Kafka", lambda: processes.port_open(port), timeout=120, proc=proc)
    return proc
