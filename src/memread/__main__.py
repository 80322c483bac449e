from memread.cli import main

raise SystemExit(main())
