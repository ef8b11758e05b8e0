from lowtail.cli import main

main()
