"""Python tooling around the vcmt dbt package: oracle, CDC generator, stage writer, demo, bench."""
