"""Helpers of the least-privilege tests, the area's one helper module: a package by concept, as
several tests share each concept and the whole ran past 650 lines in one file.

- :mod:`.moto`: the moto servers (one enforcing IAM, one recording every request);
- :mod:`.templates`: the synthesized templates, a role's statements, intrinsics resolved;
- :mod:`.statements`: IAM statements evaluated, and the statements a set of accesses needs;
- :mod:`.runs`: a component's run under a set of statements, and its docs/iam.md row;
- :mod:`.gate`: a handler run in-process as a role, every call checked by the gate;
- :mod:`.recorded`: recorded requests (S3, CloudWatch, Glue jobs, Kinesis) as IAM accesses;
- :mod:`.kafka`: the Kafka broker's authorization decisions as MSK IAM accesses;
- :mod:`.metastore`: the Hive metastore's audited calls as Glue Data Catalog accesses.

What one test alone feeds its component (events, a fake MSK Connect) lives in that test.
"""
