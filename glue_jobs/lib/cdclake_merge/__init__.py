"""The CDC merge library: Debezium change files in, a correct lake table out.

Shipped to Glue as ``--extra-py-files`` (a zip of ``glue_jobs/lib``) and installed
locally by ``pip install -e .``; import it as ``cdclake_merge`` in both places.
"""
