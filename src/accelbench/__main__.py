from accelbench.cli.main import main

main()
