from vcmt_tools.cdc.cli import main

raise SystemExit(main())
