"""vcmt's commands and what they are made of.

- `vcmt_cli.load_stage`: `vcmt-load-stage`, the external writer (`load_rows`, `load_file` from Python);
- `vcmt_cli.spark_server`: `vcmt-spark-server`, a Spark Connect server in the foreground;
- `vcmt_cli.processes`: free ports and the child processes of the servers vcmt starts;
- `vcmt_cli.dbt_invoke`: runs one dbt command in this process and keeps its log.

What a staging model imports is `vcmt_staging`.
"""
