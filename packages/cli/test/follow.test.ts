/**
 * `muse log <id> --follow` beside a headless crew session that is running: the events as they are
 * stored, progress lines (the turn, each member's status, tokens, elapsed time) while it runs, and
 * an end of its own once the session's process has let go of the log.
 */
import { spawn } from "node:child_process"
import { beforeAll, describe, expect, it } from "vitest"
import { bin, buggyRepo, ensureBuilt, muse, museAsync, readLog, sandbox, writeScript } from "./support/cli.js"

beforeAll(() => ensureBuilt(), 240_000)

const script = {
  replies: [
    {
      agent: "main",
      when: "Crew reports",
      steps: [{ text: "Noted." }]
    },
    {
      agent: "main",
      when: "count the files",
      steps: [
        {
          text: "Asking a worker.",
          usage: { input: 1000, output: 50 },
          tools: [{ name: "delegate", params: { to: "explorer", task: "count the files slowly" } }]
        },
        { text: "An explorer is on it." }
      ]
    },
    {
      agent: "explorer",
      when: "slowly",
      steps: [
        { delayMs: 1500, tools: [{ name: "list_files", params: {} }] },
        { delayMs: 1500, tools: [{ name: "run_shell", params: { command: "sleep 1 && ls | wc -l" } }] },
        { text: "3 files." }
      ]
    }
  ]
}

describe("muse log --follow", () => {
  it("prints a running session's events and progress as they come, and ends when the session does", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const file = writeScript(sb, "slow", script)
    const run = museAsync(
      ["run", "count the files", "--script", file, "--approval-mode", "auto", "--output-format", "stream-json"],
      {
        sb,
        cwd: repo
      }
    )
    const session = (await run.waitForLine((l) => l.kind === "session")).session as string
    await run.waitForLine((l) => l.kind === "event" && l.event.type === "user.input")
    const follower = spawn(process.execPath, [bin, "log", session, "--follow"], {
      cwd: repo,
      env: sb.env,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    const progressWhileRunning: Array<string> = []
    follower.stdout.setEncoding("utf8").on("data", (d: string) => (out += d))
    follower.stderr.setEncoding("utf8").on("data", (d: string) => {
      err += d
      if (run.child.exitCode === null) progressWhileRunning.push(...d.split("\n").filter((l) => l.startsWith("── ")))
    })
    const followed = new Promise<number | null>((resolve) => follower.on("exit", (code) => resolve(code)))
    const ran = await run.exited
    expect(ran.code, run.stderr()).toBe(0)
    expect(await followed).toBe(0)

    // every event, once, in order, as muse log prints them
    const log = readLog(sb, session)
    const printed = muse(["log", session], { sb, cwd: repo }).stdout
    expect(out).toBe(printed)
    expect(out.trim().split("\n")).toHaveLength(log.length)
    // progress while it ran: the turn, the explorer's status, tokens
    expect(progressWhileRunning.length).toBeGreaterThan(0)
    expect(progressWhileRunning.some((l) => /explorer-1: (running|waiting on the model|task: )/.test(l))).toBe(true)
    expect(progressWhileRunning[0]).toMatch(/^── turn 1 · \d/)
    // the last line: the whole session, and that it is over
    const lines = err.trim().split("\n")
    expect(lines.at(-1)).toBe(`session ${session} is not running (${log.length} events)`)
    const tokens = log
      .filter((e) => e.type === "model.responded")
      .reduce((n, e) => n + e.data.usage.inputTokens + e.data.usage.outputTokens, 0)
    expect(lines.at(-2)).toContain(`${tokens.toLocaleString("en-US")} tokens`)
    expect(lines.at(-2)).toContain("explorer-1: idle (completed)")
  }, 120_000)

  it("on a finished session prints the log and its summary, and returns at once", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const file = writeScript(sb, "hi", { steps: [{ text: "Hello." }] })
    const r = muse(["run", "say hello", "--script", file, "--no-crew", "--output-format", "json"], { sb, cwd: repo })
    const session = JSON.parse(r.stdout).session
    const f = muse(["log", session, "-f", "--json"], { sb, cwd: repo, timeoutMs: 20_000 })
    expect(f.code).toBe(0)
    expect(
      f.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).seq)
    ).toEqual(readLog(sb, session).map((e) => e.seq))
    expect(f.stderr).toMatch(/── turn 1 · .* · 120 tokens · main: idle \(completed\)\n/)
  })
})
