from vcmt_lab.bench.cli import main

raise SystemExit(main())
