#!/usr/bin/env node
/**
 * The `muse` executable. `--version` answers before anything else is loaded; every other command
 * loads the CLI on demand.
 */
declare const __MUSE_VERSION__: string | undefined

const args = process.argv.slice(2)
if (args.length === 1 && (args[0] === "--version" || args[0] === "-v")) {
  const v = typeof __MUSE_VERSION__ === "string" ? __MUSE_VERSION__ : (await import("./internal/version.js")).version()
  process.stdout.write(`${v}\n`)
} else {
  // a reader that went away (`muse log | head`) is not an error
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code === "EPIPE") process.exit(process.exitCode ?? 0)
      throw e
    })
  }
  // Node ends a process whose every task waits on something that can no longer happen with
  // exit code 13 and no word; say what it means
  let finished = false
  process.on("exit", (code) => {
    if (code === 13 && !finished) {
      process.stderr.write(
        "\nmuse: the session stalled: every agent was waiting and nothing was left to wake it. Its log is kept; `muse resume` continues it.\n"
      )
    }
  })
  // a session a cluster runner started ends with the runner: its stdin (a pipe from the runner)
  // closes when the runner dies, and the session stops as a killed one would (another runner
  // takes it over from the log)
  if (process.env.MUSE_EXIT_WITH_PARENT === "1") {
    // and when it is reparented (a read of stdin may be paused by the session)
    const parent = process.ppid
    setInterval(() => {
      if (process.ppid !== parent) process.kill(process.pid, "SIGKILL")
    }, 200).unref()
    if (!process.stdin.isTTY) {
      process.stdin.on("end", () => process.kill(process.pid, "SIGKILL"))
      process.stdin.resume()
    }
  }
  const { main } = await import("./internal/main.js")
  const code = await main({
    argv: args,
    env: process.env,
    cwd: process.cwd(),
    stdin: process.stdin,
    stdout: process.stdout,
    stderr: process.stderr
  })
  finished = true
  process.exitCode = code
  // pending timers or listeners (a stopped tool, stdin) must not keep the process alive
  setImmediate(() => process.exit(code))
}
