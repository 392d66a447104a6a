"""The lab around the vcmt package: test driver, oracle, invariants, CDC generator, demo, fuzz, bench.

Not shipped in the package's wheel. The lab imports the product (`vcmt_staging`, `vcmt_cli`, the dbt adapters);
the product never imports the lab.
"""
