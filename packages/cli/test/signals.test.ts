/**
 * Signals and kills at every phase of a session, with real processes: after each, `muse resume`
 * finishes the task exactly once, or says precisely why not with a non-zero exit code.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { buggyRepo, ensureBuilt, muse, museAsync, readLog, sandbox, writeScript } from "./support/cli.js"

beforeAll(() => ensureBuilt(), 240_000)

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const parseLines = (text: string) =>
  text
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l))

/**
 * The task: a command that takes long (stopped by the signal; it would append to ran.txt), then one
 * that appends to once.txt (must happen exactly once), then the final answer. The first reply streams
 * slowly, so a signal can land while it streams.
 */
const SLOW_TEXT = "Let me run the long command now and then check what it did to the files here."
const taskScript = {
  replies: [
    {
      when: "the task",
      steps: [
        {
          text: SLOW_TEXT,
          chunkDelayMs: 120,
          tools: [{ name: "run_shell", params: { command: "sleep 40 && echo ran >> ran.txt" } }]
        },
        { text: "Recording it once.", tools: [{ name: "run_shell", params: { command: "echo once >> once.txt" } }] },
        { text: "Finished." }
      ]
    }
  ]
}

const lockOf = (state: string, session: string) => path.join(state, "sessions", `${session}.lock`)

const start = (sb: ReturnType<typeof sandbox>, repo: string, script: string) =>
  museAsync(["run", "the task", "--script", script, "--approval-mode", "auto", "--output-format", "stream-json"], {
    sb,
    cwd: repo
  })

/**
 * `muse resume` finishes the task exactly once (`ran`: what ran.txt then holds); a second resume
 * has nothing to do; the log replays.
 */
const resumeFinishes = (
  sb: ReturnType<typeof sandbox>,
  repo: string,
  script: string,
  session: string,
  ran: string | undefined = undefined
) => {
  const r = muse(["resume", session, "--script", script, "--output-format", "json"], { sb, cwd: repo })
  expect(r.code, r.stderr).toBe(0)
  expect(JSON.parse(r.stdout)).toMatchObject({ session, status: "completed", text: "Finished." })
  expect(fs.readFileSync(path.join(repo, "once.txt"), "utf8")).toBe("once\n")
  if (ran === undefined) expect(fs.existsSync(path.join(repo, "ran.txt"))).toBe(false)
  else expect(fs.readFileSync(path.join(repo, "ran.txt"), "utf8")).toBe(ran)
  const log = readLog(sb, session)
  expect(log.filter((e) => e.agent === "main" && e.type === "turn.completed")).toHaveLength(1)
  expect(log.filter((e) => e.type === "user.input")).toHaveLength(1)

  const again = muse(["resume", session, "--script", script], { sb, cwd: repo })
  expect(again.code).toBe(4)
  expect(again.stderr).toContain(`session ${session} has nothing to resume: its last task ended (completed)`)
  expect(readLog(sb, session)).toHaveLength(log.length)

  const v = muse(["replay", session, "--verify"], { sb, cwd: repo })
  expect(v.code, v.stderr).toBe(0)
  expect(v.stderr).toContain(`verified: ${log.length} of ${log.length} events replayed exactly`)
}

describe("signals, then muse resume", () => {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    const code = signal === "SIGINT" ? 130 : 143

    it(`${signal} mid-tool: the tool is settled, the turn recorded as interrupted, the lock released; resume goes on`, async () => {
      const sb = sandbox()
      const repo = buggyRepo(sb.root)
      const script = writeScript(sb, "task", taskScript)
      const p = start(sb, repo, script)
      const session = (await p.waitForLine((l) => l.kind === "session")).session as string
      await p.waitForLine((l) => l.kind === "event" && l.event.type === "tool.started")
      const sent = Date.now()
      p.child.kill(signal)
      const exit = await p.exited
      expect(exit.code).toBe(code)
      expect(Date.now() - sent).toBeLessThan(15_000)
      expect(parseLines(p.stdout()).at(-1)).toMatchObject({ kind: "result", status: "interrupted", exitCode: code })
      expect(p.stdout()).toContain(`stopped by ${signal}`)

      const log = readLog(sb, session)
      expect(log.slice(-3).map((e) => e.type)).toEqual(["tool.started", "tool.completed", "turn.interrupted"])
      const settled = log.at(-2)
      expect(settled.parent).toBe(log.at(-3).id)
      expect(settled.data.isFailure).toBe(true)
      expect(settled.data.result.error).toContain(`interrupted (stopped by ${signal}) while run_shell was running`)
      expect(log.at(-1).data).toEqual({ reason: `stopped by ${signal}` })
      expect(fs.existsSync(lockOf(sb.state, session))).toBe(false)

      resumeFinishes(sb, repo, script, session)
      const resumed = readLog(sb, session).filter((e) => e.type === "turn.resumed")
      expect(resumed).toHaveLength(1)
    })

    it(`${signal} mid-stream: the request is left without an answer, the turn recorded as interrupted; resume asks again`, async () => {
      const sb = sandbox()
      const repo = buggyRepo(sb.root)
      // the first reply streams slowly and then runs a quick command: cut before it, it runs once, on resume
      const quickFirst = structuredClone(taskScript)
      quickFirst.replies[0]!.steps[0]!.tools = [{ name: "run_shell", params: { command: "echo ran >> ran.txt" } }]
      const script = writeScript(sb, "task", quickFirst)
      const p = start(sb, repo, script)
      const session = (await p.waitForLine((l) => l.kind === "session")).session as string
      await p.waitForLine((l) => l.kind === "text")
      p.child.kill(signal)
      const exit = await p.exited
      expect(exit.code).toBe(code)
      const streamed = parseLines(p.stdout())
        .filter((l) => l.kind === "text")
        .map((l) => l.delta)
        .join("")
      expect(streamed.length).toBeGreaterThan(0)
      expect(streamed.length).toBeLessThan(SLOW_TEXT.length)

      const log = readLog(sb, session)
      expect(log.slice(-2).map((e) => e.type)).toEqual(["model.requested", "turn.interrupted"])
      expect(fs.existsSync(lockOf(sb.state, session))).toBe(false)
      expect(fs.existsSync(path.join(repo, "ran.txt"))).toBe(false)
      resumeFinishes(sb, repo, script, session, "ran\n")
    })
  }

  it("SIGKILL while a run starts: the session exists with its task, or not at all", { timeout: 240_000 }, async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "task", {
      replies: [
        {
          when: "the task",
          steps: [
            {
              text: "Recording it once.",
              tools: [{ name: "run_shell", params: { command: "echo once >> once.txt" } }]
            },
            { text: "Finished." }
          ]
        }
      ]
    })
    const outcomes = new Set<string>()
    for (const delay of [0, 3, 10, 30, 80]) {
      fs.rmSync(path.join(repo, "once.txt"), { force: true })
      const p = start(sb, repo, script)
      const session = (await p.waitForLine((l) => l.kind === "session")).session as string
      await sleep(delay)
      p.child.kill("SIGKILL")
      await p.exited
      const file = path.join(sb.state, "sessions", `${session}.jsonl`)
      if (!fs.existsSync(file)) {
        outcomes.add("no log")
        // nothing was recorded: nothing to list, and resume says there is no such session
        expect(muse(["sessions", "--json"], { sb, cwd: repo }).stdout).not.toContain(session)
        const r = muse(["resume", session, "--script", script], { sb, cwd: repo })
        expect(r.code).toBe(2)
        expect(r.stderr).toContain(`no such session: "${session}"`)
        continue
      }
      // the log never exists without its task: both are in its first write
      const log = readLog(sb, session)
      expect(log.slice(0, 2).map((e) => e.type)).toEqual(["session.started", "user.input"])
      expect(log[1].data.text).toBe("the task")
      outcomes.add(log.some((e) => e.type === "turn.completed") ? "finished" : "cut short")
      const r = muse(["resume", session, "--script", script, "--output-format", "json"], { sb, cwd: repo })
      const done = log.some((e) => e.agent === "main" && e.type === "turn.completed")
      if (done) {
        expect(r.code).toBe(4)
      } else {
        expect(r.code, r.stderr).toBe(0)
        expect(JSON.parse(r.stdout)).toMatchObject({ status: "completed", text: "Finished." })
      }
      // the task's command ran at most once: exactly once, in the killed run or in the resume, unless the
      // kill came after it was recorded as started, when the resume says it was interrupted and does not
      // run it again (it may or may not have run before the kill)
      const once = path.join(repo, "once.txt")
      const ran = fs.existsSync(once) ? fs.readFileSync(once, "utf8") : ""
      const interrupted = readLog(sb, session).some(
        (e) => e.type === "tool.completed" && /^interrupted: /.test(e.data.result?.error ?? "")
      )
      if (interrupted) {
        outcomes.add("interrupted mid-tool")
        expect(["", "once\n"]).toContain(ran)
      } else {
        expect(ran).toBe("once\n")
      }
    }
    expect(outcomes.size).toBeGreaterThan(0)
  })

  it("a log left empty, or with its first line cut, opens as a session without a task; resume says so", {
    timeout: 180_000
  }, () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const sessions = path.join(sb.state, "sessions")
    fs.mkdirSync(sessions, { recursive: true })
    fs.writeFileSync(path.join(sessions, "20250101-000000-aaaaaa.jsonl"), "", { mode: 0o600 })
    fs.writeFileSync(path.join(sessions, "20250101-000000-aaaaaa.lock"), "4194305")
    fs.writeFileSync(
      path.join(sessions, "20250101-000001-bbbbbb.jsonl"),
      '{"v":1,"seq":0,"id":"e0","at":1,"agent":"main","ty'
    )
    for (const id of ["20250101-000000-aaaaaa", "20250101-000001-bbbbbb"]) {
      const r = muse(["resume", id], { sb, cwd: repo })
      expect(r.code).toBe(4)
      expect(r.stderr).toContain(`session ${id} has no task: it stopped before its task was recorded`)
      const again = muse(["resume", id], { sb, cwd: repo })
      expect(again.code).toBe(4)
      expect(muse(["replay", id], { sb, cwd: repo }).code).toBe(0)
      expect(muse(["log", id], { sb, cwd: repo }).code).toBe(0)
    }
    // the stale lock is gone; the cut first line was kept aside
    expect(fs.existsSync(path.join(sessions, "20250101-000000-aaaaaa.lock"))).toBe(false)
    expect(fs.readdirSync(sessions).some((f) => f.startsWith("20250101-000001-bbbbbb.jsonl.torn-"))).toBe(true)
    // plain `muse resume` finds the newest of them, and `muse sessions` does not claim a task for it
    const plain = muse(["resume"], { sb, cwd: repo })
    expect(plain.code).toBe(4)
    expect(plain.stderr).toContain("has no task")
    const listed = muse(["sessions", "--json"], { sb, cwd: repo }).stdout
    expect(JSON.parse(listed.split("\n")[0]!).title).toBe("(empty: stopped before its task was recorded)")
  })

  it("SIGKILL during the replay of a resume: the next resume finishes the task exactly once", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    // many quick steps first, so that a resume has a long log to replay
    const reads = Array.from({ length: 120 }, () => ({ tools: [{ name: "read_file", params: { path: "sum.js" } }] }))
    const script = writeScript(sb, "task", {
      replies: [
        {
          when: "the task",
          steps: [
            ...reads,
            { text: "Now the slow part.", delayMs: 60_000, tools: [{ name: "read_file", params: { path: "sum.js" } }] },
            {
              text: "Recording it once.",
              tools: [{ name: "run_shell", params: { command: "echo once >> once.txt" } }]
            },
            { text: "Finished." }
          ]
        }
      ]
    })
    const p = start(sb, repo, script)
    const session = (await p.waitForLine((l) => l.kind === "session")).session as string
    // the request after the reads is in flight (its answer takes a minute): kill the run there
    await p.waitForLine(
      (l) => l.kind === "event" && l.event.type === "model.requested" && l.event.data.messages > 240,
      120_000
    )
    p.child.kill("SIGKILL")
    await p.exited
    const cut = readLog(sb, session)
    expect(cut.at(-1).type).toBe("model.requested")

    // a resume, killed while it replays (before it writes anything)
    const q = museAsync(["resume", session, "--script", script, "--output-format", "stream-json"], { sb, cwd: repo })
    await q.waitForLine((l) => l.kind === "session")
    q.child.kill("SIGKILL")
    await q.exited
    expect(readLog(sb, session).length).toBeGreaterThanOrEqual(cut.length)

    // the next resume asks the cut request again and finishes; the script's slow step answers a minute
    // later, so let it be quick this time
    const quick = writeScript(sb, "task", {
      replies: [
        {
          when: "the task",
          steps: [
            ...reads,
            { text: "Now the slow part.", tools: [{ name: "read_file", params: { path: "sum.js" } }] },
            {
              text: "Recording it once.",
              tools: [{ name: "run_shell", params: { command: "echo once >> once.txt" } }]
            },
            { text: "Finished." }
          ]
        }
      ]
    })
    resumeFinishes(sb, repo, quick, session)
  }, 300_000)

  it("a resume refused because another process holds the session shows none of that process's work", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "task", taskScript)
    const p = start(sb, repo, script)
    const session = (await p.waitForLine((l) => l.kind === "session")).session as string
    await p.waitForLine((l) => l.kind === "event" && l.event.type === "tool.started")
    const r = muse(["resume", session, "--script", script, "--output-format", "json"], { sb, cwd: repo })
    expect(r.code).toBe(1)
    const out = JSON.parse(r.stdout)
    expect(out).toMatchObject({ status: "failed", events: 0, modelCalls: 0 })
    expect(out.reason).toContain(`session ${session} is in use by process ${p.child.pid}; nothing was done`)
    const text = muse(["resume", session, "--script", script], { sb, cwd: repo })
    expect(text.code).toBe(1)
    expect(text.stdout).toBe("")
    expect(text.stderr).not.toContain("run_shell")
    p.child.kill("SIGTERM")
    expect((await p.exited).code).toBe(143)
  })
})
