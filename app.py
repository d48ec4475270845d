#!/usr/bin/env python3
"""CDK entry point: ``cdk synth -c env=prod`` builds every stack of one environment."""

import sys
from pathlib import Path

import aws_cdk as cdk

from cdclake_merge.session import MissingJars  # imports no Spark
from environment.config import ConfigError, load_config
from stacks import build_stacks

app = cdk.App()
env_name = app.node.try_get_context("env") or "dev"
config_dir = app.node.try_get_context("config_dir")  # tests point this at a scratch folder
try:
    config = load_config(env_name, config_dir=Path(config_dir) if config_dir else None)
    # A config that only fails while stacks are built (a plugin zip not built yet, a consumer
    # name too long for its rule) is a ConfigError too, and a jar `make setup` has not built
    # yet is a setup step: one line each, no traceback.
    build_stacks(app, config)
except (ConfigError, MissingJars) as exc:
    sys.exit(str(exc))
app.synth()
