from simpletfjob.cli import main

main()
