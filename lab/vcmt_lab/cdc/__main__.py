from vcmt_lab.cdc.cli import main

raise SystemExit(main())
