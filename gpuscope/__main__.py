from gpuscope.cli.main import main

main()
