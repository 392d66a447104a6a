from vcmt_tools.bench.cli import main

raise SystemExit(main())
