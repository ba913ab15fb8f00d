import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Tools } from "@musekit/core"
import { Effect, Fiber } from "effect"
import { CodingTools, WorkspaceNode } from "../src/index.js"

const harness = (options?: CodingTools.Options) =>
  Effect.gen(function* () {
    const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "muse-shell-")))
    const workspace = yield* WorkspaceNode.make(root)
    const chunks: Array<{ readonly at: number; readonly text: string }> = []
    const ctx: Tools.CallContext = {
      agent: "main",
      callId: "c",
      workspace,
      progress: (text) => Effect.sync(() => void chunks.push({ at: Date.now(), text }))
    }
    const def = CodingTools.runShell(options)
    const run = (params: { command: string; timeout_ms?: number }): Effect.Effect<CodingTools.ShellResult, any> =>
      Effect.flatMap(Tools.decodeParams(def, params), (p) => def.handler(p, ctx))
    return { root, run, chunks }
  })

/** A `sleep` duration no other test uses, so its processes can be found in /proc. */
const uniqueSleep = () => String(3000 + Math.floor(Math.random() * 6000))

/** Pids of live `sleep <seconds>` processes (zombies have an empty cmdline and are not counted). */
const sleepers = (seconds: string): Array<string> =>
  fs.readdirSync("/proc").filter((pid) => {
    if (!/^\d+$/.test(pid)) return false
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8") === `sleep\0${seconds}\0`
    } catch {
      return false
    }
  })

const waitUntil = (check: () => boolean, timeoutMs: number) =>
  Effect.gen(function* () {
    const end = Date.now() + timeoutMs
    while (!check() && Date.now() < end) yield* Effect.sleep("20 millis")
    return check()
  })

describe("CodingTools: run_shell", () => {
  it.live("returns exit codes as results, runs in the workspace root with the process env", () =>
    Effect.gen(function* () {
      const { run, root } = yield* harness()
      const failed = yield* run({ command: "echo out; echo err >&2; exit 3" })
      expect(failed.exit_code).toBe(3)
      expect(failed.timed_out).toBe(false)
      expect(failed.output).toContain("out\n")
      expect(failed.output).toContain("err\n")
      expect(yield* run({ command: "true" })).toEqual({ exit_code: 0, output: "", timed_out: false })
      expect((yield* run({ command: "pwd" })).output).toBe(`${root}\n`)
      process.env.MUSE_SHELL_TEST = "from-env"
      expect((yield* run({ command: 'printf %s "$MUSE_SHELL_TEST"' })).output).toBe("from-env")
      delete process.env.MUSE_SHELL_TEST
      expect((yield* Effect.flip(run({ command: "" }))).message).toContain("invalid arguments for run_shell")
    })
  )

  it.live("a timeout kills the whole process tree", () =>
    Effect.gen(function* () {
      const { run } = yield* harness()
      const s = uniqueSleep()
      const started = Date.now()
      const fiber = yield* Effect.fork(run({ command: `sleep ${s} & sleep ${s}`, timeout_ms: 800 }))
      expect(yield* waitUntil(() => sleepers(s).length === 2, 5000)).toBe(true)
      const r = yield* Fiber.join(fiber)
      expect(Date.now() - started).toBeLessThan(5000)
      expect(r).toMatchObject({ exit_code: null, timed_out: true, signal: "SIGKILL" })
      expect(r.note).toBe("timed out after 800 ms; the command and its child processes were killed")
      expect(yield* waitUntil(() => sleepers(s).length === 0, 2000)).toBe(true)
    })
  )

  it.live("interrupting the call kills the whole process tree", () =>
    Effect.gen(function* () {
      const { run } = yield* harness()
      const s = uniqueSleep()
      const fiber = yield* Effect.fork(run({ command: `sleep ${s} & sleep ${s}; echo never` }))
      expect(yield* waitUntil(() => sleepers(s).length === 2, 5000)).toBe(true)
      yield* Fiber.interrupt(fiber)
      expect(yield* waitUntil(() => sleepers(s).length === 0, 2000)).toBe(true)
    })
  )

  it.live("caps the output, keeping the tail and saying how much was cut", () =>
    Effect.gen(function* () {
      const { run } = yield* harness({ shellMaxOutputBytes: 1000 })
      const full = Array.from({ length: 20_000 }, (_, i) => `${i + 1}\n`).join("")
      const r = yield* run({ command: "seq 1 20000" })
      expect(r.exit_code).toBe(0)
      expect(r.output).toBe(
        `[… ${full.length - 1000} bytes of earlier output cut; showing the last 1000 of ${full.length} bytes]\n${full.slice(-1000)}`
      )
      // a cut never starts inside a UTF-8 sequence
      const { run: tiny } = yield* harness({ shellMaxOutputBytes: 9 })
      const u = yield* tiny({ command: "printf 'ééééééééééé'" })
      expect(u.output).toBe("[… 14 bytes of earlier output cut; showing the last 8 of 22 bytes]\néééé")
    })
  )

  it.live("streams output through progress before the command ends", () =>
    Effect.gen(function* () {
      const { run, chunks } = yield* harness()
      const r = yield* run({ command: "echo first; sleep 1; echo second" })
      const ended = Date.now()
      expect(r.output).toBe("first\nsecond\n")
      expect(chunks.map((c) => c.text).join("")).toBe("first\nsecond\n")
      expect(chunks[0]!.text).toBe("first\n")
      expect(ended - chunks[0]!.at).toBeGreaterThan(700)
    })
  )

  it.live("background processes holding the output are stopped; redirected ones keep running", () =>
    Effect.gen(function* () {
      const { run } = yield* harness()
      const held = uniqueSleep()
      const started = Date.now()
      const r = yield* run({ command: `sleep ${held} & echo started` })
      expect(Date.now() - started).toBeLessThan(5000)
      expect(r).toMatchObject({ exit_code: 0, output: "started\n", timed_out: false })
      expect(r.note).toBe("background processes still holding the output open were killed when the command ended")
      expect(yield* waitUntil(() => sleepers(held).length === 0, 2000)).toBe(true)

      const detached = uniqueSleep()
      const d = yield* run({ command: `sleep ${detached} >/dev/null 2>&1 & echo ok` })
      expect(d).toEqual({ exit_code: 0, output: "ok\n", timed_out: false })
      const alive = sleepers(detached)
      expect(alive).toHaveLength(1)
      for (const pid of alive) process.kill(Number(pid), "SIGKILL")
    })
  )

  it.live("timeout_ms is limited to the maximum", () =>
    Effect.gen(function* () {
      const { run } = yield* harness({ shellMaxTimeoutMs: 1000 })
      const r = yield* run({ command: "true", timeout_ms: 5000 })
      expect(r.note).toBe("timeout_ms was lowered to the maximum of 1000 ms")
      const slow = yield* run({ command: "sleep 3", timeout_ms: 5000 })
      expect(slow.timed_out).toBe(true)
    })
  )
})
