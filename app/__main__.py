from sub250.cli import main

if __name__ == "__main__":  # the guard matters: vLLM starts its engine in child processes
    raise SystemExit(main())
