#!/usr/bin/env node
/**
 * The `muse` executable. `--version` answers before anything else is loaded; every other command
 * loads the CLI on demand.
 */
declare const __MUSE_VERSION__: string | undefined

type Main = typeof import("./internal/main.js").main

/**
 * The commands, from `boot.cjs` beside this file with a V8 code cache when the build made one
 * (a start spends much of its time compiling the bundle); else (run from source, or a broken
 * `boot.cjs`) from the ES modules. `MUSE_CODE_CACHE=0` compiles without a cache;
 * `MUSE_CODE_CACHE_DIR` chooses its folder; `MUSE_DEBUG_CODE_CACHE=1` says what happened to it.
 */
async function loadMain(): Promise<{ readonly main: Main }> {
  const { existsSync } = await import("node:fs")
  const { fileURLToPath } = await import("node:url")
  const boot = fileURLToPath(new URL("./boot.cjs", import.meta.url))
  if (existsSync(boot)) {
    const [{ cacheDirs, loadScript }, heap] = await Promise.all([
      import("./internal/codeCache.js"),
      import("./internal/heapPolicy.js")
    ])
    try {
      const env = process.env
      const loaded = loadScript(boot, {
        dirs: cacheDirs(boot, env),
        enabled: env.MUSE_CODE_CACHE !== "0",
        // a smaller V8 heap for long sessions, from before the commands load (see heapPolicy.ts)
        compiled: () => heap.applyHeapPolicy(env)
      })
      const main = (loaded.exports as { main?: Main }).main
      if (env.MUSE_DEBUG_CODE_CACHE)
        process.stderr.write(`muse: code cache ${loaded.cache} ${loaded.cacheFile ?? ""}\n`)
      if (typeof main === "function") {
        if (loaded.cache !== "hit" && loaded.cache !== "off") {
          // written once the first request is under way, or at exit if the command ends sooner
          // (under V8's default flags: the next start takes no cache made under other flags)
          const persist = () => void heap.withDefaultFlags(loaded.persist)
          setTimeout(persist, 1000).unref()
          process.once("exit", persist)
        }
        return { main }
      }
    } catch (e) {
      if (process.env.MUSE_DEBUG_CODE_CACHE)
        process.stderr.write(`muse: boot.cjs did not load (${String(e)}); using the ES modules\n`)
    }
  }
  ;(await import("./internal/heapPolicy.js")).applyHeapPolicy(process.env)
  return import("./internal/main.js")
}

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
  // what muse alone reads (where the log is: a database URL holds its password; a cluster
  // session's tie to its runner) is not passed on to the commands, servers and sessions it starts
  const env = { ...process.env }
  delete process.env.MUSE_LOG
  delete process.env.MUSE_EXIT_WITH_PARENT
  const { main } = await loadMain()
  const code = await main({
    argv: args,
    env,
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
