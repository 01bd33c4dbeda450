from snode.sim.cli import main

main()
