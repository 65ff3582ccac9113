from simpletfjob.cli import console_main

console_main()
