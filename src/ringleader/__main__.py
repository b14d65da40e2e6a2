from ringleader.cli.app import main

main()
