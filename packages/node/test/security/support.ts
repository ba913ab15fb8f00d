/**
 * Helpers of the red-team corpus: decide a call through a real `Approvals` service with the real
 * shell parser, and run commands in a real `sh` with stub programs that log what actually ran.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Approvals, type Shell } from "@musekit/core"
import { Effect } from "effect"
import { ShellParser } from "../../src/index.js"

export type Outcome = "allow" | "deny" | "ask"

export interface DecideOptions {
  readonly mode?: Approvals.Mode | undefined
  /** `"allow run_shell:npm test*"`-style shorthands or full rules. */
  readonly rules?: ReadonlyArray<string | Approvals.Rule> | undefined
  readonly parser?: Shell.Parser | null | undefined
}

/** `"allow:npm test*"` / `"deny:rm*"` / `"allow"` (every call) → a run_shell rule. */
export const rule = (text: string, tool = "run_shell"): Approvals.Rule => {
  const colon = text.indexOf(":")
  const action = (colon === -1 ? text : text.slice(0, colon)) as "allow" | "deny"
  return colon === -1
    ? { tool, action, scope: "session" }
    : { tool, pattern: text.slice(colon + 1), action, scope: "session" }
}

export const shellRequest = (command: string, tool = "run_shell"): Approvals.Request => ({
  agent: "main",
  tool,
  effect: "exec",
  summary: command,
  command
})

export const service = (options: DecideOptions = {}) =>
  Approvals.make({
    mode: options.mode ?? "auto-edit",
    rules: (options.rules ?? []).map((r) => (typeof r === "string" ? rule(r) : r)),
    shell: options.parser === null ? undefined : (options.parser ?? ShellParser.parser)
  })

export const outcomeOf = (d: Approvals.Decision | undefined): Outcome =>
  d === undefined ? "ask" : d.allow ? "allow" : "deny"

/** The outcome for a request (a shell command by default). */
export const decide = (request: Approvals.Request | string, options: DecideOptions = {}): Promise<Outcome> =>
  Effect.runPromise(
    Effect.flatMap(service(options), (s) =>
      Effect.map(s.check(typeof request === "string" ? shellRequest(request) : request), outcomeOf)
    )
  )

/**
 * A sandbox for running commands in a real `sh`: a `bin/` of stub programs that append their
 * argv (one JSON array per line) to `ran.log`, and real wrappers (`env`, `timeout`, `xargs`, …)
 * linked beside them, so `PATH=bin` runs nothing else by name.
 */
export const sandbox = (stubs: ReadonlyArray<string>) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-redteam-"))
  const bin = path.join(dir, "bin")
  const work = path.join(dir, "work")
  fs.mkdirSync(bin)
  fs.mkdirSync(work)
  let runs = 0
  for (const name of stubs) {
    const file = path.join(bin, name)
    fs.writeFileSync(
      file,
      // one line per run: the name, then each argument after a unit separator
      `#!/bin/sh\n{ printf '%s' "\${0##*/}"; for a in "$@"; do printf '\\037%s' "$a"; done; printf '\\n'; } >> "$REDTEAM_LOG"\n`,
      { mode: 0o755 }
    )
  }
  for (const real of [
    "env",
    "timeout",
    "nice",
    "nohup",
    "xargs",
    "sh",
    "bash",
    "dash",
    "stdbuf",
    "setsid",
    "cat",
    "find"
  ]) {
    const found = ["/usr/bin", "/bin"].map((d) => path.join(d, real)).find((p) => fs.existsSync(p))
    if (found && !stubs.includes(real)) fs.symlinkSync(found, path.join(bin, real))
  }
  return {
    dir,
    bin,
    work,
    /** Run `command` with `sh -c` (or `shell`) in `work/` with `PATH=bin`; the argv of each stub that ran. */
    run: (command: string, shell = "/bin/sh"): ReadonlyArray<ReadonlyArray<string>> => {
      // a log of its own per run (a background job of an earlier run cannot write into it), and
      // `wait` so that this run's background jobs have logged before it is read
      const log = path.join(dir, `ran-${runs++}.log`)
      try {
        execFileSync(shell, ["-c", 'eval "$REDTEAM_CMD"\nwait'], {
          cwd: work,
          env: { PATH: bin, HOME: dir, REDTEAM_LOG: log, REDTEAM_CMD: command },
          stdio: "ignore",
          timeout: 5000
        })
      } catch {}
      return fs.existsSync(log)
        ? fs
            .readFileSync(log, "utf8")
            .split("\n")
            .filter((l) => l !== "")
            .map((l) => l.split("\u001f"))
        : []
    },
    cleanup: () => fs.rmSync(dir, { recursive: true, force: true })
  }
}
