/**
 * The interactive UI tells the truth in a pseudo-terminal: Ctrl-C stops the whole crew's work,
 * nothing is shown twice, a resize leaves no ghost line, a rate-limit back-off shows its countdown.
 */
import * as fs from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { afterEach, beforeAll, describe, expect, it } from "vitest"
import { bin, buggyRepo, ensureBuilt, readLog, sandbox, writeScript } from "./support/cli.js"
import { type Session, spawnInTerminal } from "./support/terminal.js"

beforeAll(() => ensureBuilt(), 240_000)

let term: Session | undefined
afterEach(() => term?.kill())

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** How many lines of the whole terminal (scrollback and screen) contain `text`. */
const count = (t: Session, text: string) =>
  t
    .all()
    .split("\n")
    .filter((l) => l.includes(text)).length

const waitForLog = async (sb: ReturnType<typeof sandbox>, session: string, pred: (events: Array<any>) => boolean) => {
  const deadline = Date.now() + 30_000
  while (Date.now() < deadline) {
    const file = path.join(sb.state, "sessions", `${session}.jsonl`)
    if (fs.existsSync(file) && pred(readLog(sb, session))) return
    await sleep(100)
  }
  throw new Error("the log never showed what was expected")
}

const sessionOf = (t: Session) => /session (\d{8}-\d{6}-[0-9a-f]{6})/.exec(t.all())![1]!

describe("the interactive UI tells the truth", () => {
  it("Ctrl-C with a busy crew stops every member's turn; later reports wait for the person", async () => {
    const sb = sandbox({ TERM: "xterm-256color" })
    const repo = buggyRepo(sb.root)
    const file = writeScript(sb, "crew", {
      replies: [
        // the person's next input, with the reports that waited for it
        { agent: "main", when: "Crew reports", steps: [{ text: "The crew was stopped; nothing more ran." }] },
        {
          agent: "main",
          when: "split the work",
          steps: [
            {
              text: "Two workers take it.",
              tools: [
                { name: "delegate", params: { to: "worker-1", task: "wait for part one" } },
                { name: "delegate", params: { to: "worker-2", task: "wait for part two" } }
              ]
            },
            { text: "Waiting for them.", delayMs: 120_000 }
          ]
        },
        {
          agent: "worker",
          when: "wait for part",
          steps: [
            { tools: [{ name: "run_shell", params: { command: "sleep 60 && echo late >> late.txt" } }] },
            { text: "done" }
          ]
        }
      ]
    })
    const t = spawnInTerminal(process.execPath, [bin, "--script", file, "--approval-mode", "auto", "--no-worktrees"], {
      cwd: repo,
      env: sb.env
    })
    term = t
    await t.waitFor(/\n› $/m, 40_000)
    const session = sessionOf(t)
    t.type("split the work\r")
    // both members are in their sleep, the main agent waits for its model
    await waitForLog(
      sb,
      session,
      (events) =>
        ["worker-1", "worker-2"].every((w) => events.some((e) => e.agent === w && e.type === "tool.started")) &&
        events.filter((e) => e.agent === "main" && e.type === "model.requested").length >= 2
    )
    t.type("\x03")
    await t.waitFor("■ interrupted: stopped by the user (Ctrl-C)")
    await t.waitFor(/\n› $/m, 40_000)
    const events = readLog(sb, session)
    for (const agent of ["main", "worker-1", "worker-2"]) {
      const ended = events.filter((e) => e.agent === agent && e.type === "turn.interrupted")
      expect(
        ended.map((e) => e.data.reason),
        agent
      ).toEqual(["stopped by the user (Ctrl-C)"])
    }
    for (const w of ["worker-1", "worker-2"]) {
      const settled = events.find((e) => e.agent === w && e.type === "tool.completed")
      expect(settled?.data.result.error).toContain("interrupted (stopped by the user (Ctrl-C)) while run_shell")
    }
    // the members' reports came after the stop: they did not start the main agent again
    await sleep(1500)
    const quiet = readLog(sb, session)
    expect(quiet.some((e) => e.type === "crew.reports")).toBe(false)
    expect(quiet.filter((e) => e.agent === "main" && e.type === "model.requested")).toHaveLength(2)
    // at the next input they are delivered
    t.type("what happened?\r")
    await t.waitFor("The crew was stopped; nothing more ran.")
    const after = readLog(sb, session)
    const delivered = after.find((e) => e.agent === "main" && e.type === "inbox.delivered")
    expect(delivered?.data.text).toContain("with status interrupted")
    expect(fs.existsSync(path.join(repo, "late.txt"))).toBe(false)
    t.type("\x04")
    expect((await t.exited).exitCode).toBe(0)
  })

  it("a diff asked about is shown once; a plan asked about is shown once", async () => {
    const sb = sandbox({ TERM: "xterm-256color" })
    const repo = buggyRepo(sb.root)
    const step = (id: string, intent: string) => ({
      id,
      intent,
      files: ["sum.js"],
      risks: [],
      verify: "look",
      dependsOn: []
    })
    const file = writeScript(sb, "once", {
      replies: [
        {
          agent: "main",
          when: "fix the sum",
          steps: [
            {
              tools: [
                { name: "edit_file", params: { path: "sum.js", edits: [{ old_text: "a - b", new_text: "a + b" }] } }
              ]
            },
            { text: "Fixed." }
          ]
        },
        {
          // the planner (a helper agent of the skill) gets the task as "Plan this task: …"
          when: "Plan this task",
          steps: [
            {
              tools: [
                {
                  name: "submit_plan",
                  params: {
                    title: "Tidy the sum module",
                    steps: [step("s1", "Rename the sum helper"), step("s2", "Document it")]
                  }
                }
              ]
            },
            { text: "Submitted." }
          ]
        }
      ]
    })
    const t = spawnInTerminal(process.execPath, [bin, "--script", file, "--approval-mode", "ask", "--no-crew"], {
      cwd: repo,
      env: sb.env,
      rows: 60
    })
    term = t
    await t.waitFor(/\n› $/m, 40_000)
    t.type("fix the sum\r")
    await t.waitFor("[y] yes")
    t.type("y")
    await t.waitFor("Fixed.")
    expect(count(t, "+export const sum = (a, b) => a + b")).toBe(1)
    expect(count(t, "-export const sum = (a, b) => a - b")).toBe(1)
    expect(count(t, "⎿ sum.js +1 -1")).toBe(1)

    await t.waitFor(/\n› $/m, 40_000)
    t.type("/plan tidy the sum module\r")
    await t.waitFor("approve the plan")
    await sleep(300)
    expect(count(t, "Tidy the sum module (version 1)")).toBe(1)
    expect(count(t, "[s1] Rename the sum helper")).toBe(1)
    expect(count(t, "[s2] Document it")).toBe(1)
    expect(t.all()).toContain("(the plan above)")
    // (the answer keys work once the question has been on screen for a moment)
    await t.waitFor("[n] drop it")
    await sleep(1000)
    t.type("n")
    await t.waitFor("was not run")
    t.type("\x04")
    await t.exited
  })

  it("a resize to 60 columns leaves no ghost line", async () => {
    const sb = sandbox({ TERM: "xterm-256color" })
    const repo = buggyRepo(sb.root)
    const file = writeScript(sb, "hi", { steps: [{ text: "Hello." }] })
    const t = spawnInTerminal(process.execPath, [bin, "--script", file], {
      cwd: repo,
      env: sb.env,
      cols: 100,
      rows: 30
    })
    term = t
    await t.waitFor(/\n› $/m, 40_000)
    // a prompt line wider than the terminal will be (the terminal reflows it into two rows)
    t.type("a question that is long enough to fill more than sixty columns of the prompt line, surely")
    await t.waitFor("sixty columns of the prompt line, surely")
    const statusLines = () => t.screen().filter((l) => /scripted\/hi · auto-edit · /.test(l))
    expect(statusLines()).toHaveLength(1)
    // the terminal narrows (and reflows what it shows), then tells muse
    t.term.resize(60, 30)
    t.pty.resize(60, 30)
    await sleep(800)
    // a key draws the prompt again (the footer's height now counts rows of 60 columns)
    t.type("!")
    await t.waitFor("surely!")
    await sleep(300)
    const screen = t.screen()
    expect(statusLines(), screen.join("\n")).toHaveLength(1)
    expect(
      screen.filter((l) => l.startsWith("› ")),
      screen.join("\n")
    ).toHaveLength(1)
    // nothing of the wider footer is left above the new one
    const prompt = screen.findIndex((l) => l.startsWith("› "))
    // the lines above it are still there, printed again at the new width
    expect(screen.join("\n")).toContain("Type a task, or /help.")
    expect(
      screen.slice(0, prompt).some((l) => /scripted\/hi · auto-edit|› /.test(l)),
      screen.join("\n")
    ).toBe(false)
    t.type("\r")
    await t.waitFor("Hello.")
    t.type("\x04")
    await t.exited
  })

  it("a 429 back-off shows its countdown and its reason", async () => {
    const sb = sandbox({ TERM: "xterm-256color" })
    const repo = buggyRepo(sb.root)
    let requests = 0
    const server = createServer((req, res) => {
      req.resume()
      req.on("end", () => {
        requests++
        if (requests === 1) {
          res.writeHead(429, { "content-type": "application/json", "retry-after": "4" })
          res.end(JSON.stringify({ error: { message: "Rate limit reached for requests" } }))
          return
        }
        res.writeHead(200, { "content-type": "text/event-stream" })
        const chunk = (delta: object, finish: string | null = null) =>
          `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
        res.end(
          `${chunk({ role: "assistant", content: "After the wait: hello." })}${chunk({}, "stop")}data: [DONE]\n\n`
        )
      })
    })
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    try {
      const port = (server.address() as AddressInfo).port
      const t = spawnInTerminal(
        process.execPath,
        [bin, "--model", "ollama/test-model", "--context-window", "32768", "--no-crew"],
        {
          cwd: repo,
          // (no FORCE_COLOR beside NO_COLOR: node warns about the pair on the terminal once HTTP is loaded)
          env: { ...sb.env, FORCE_COLOR: undefined, OLLAMA_BASE_URL: `http://127.0.0.1:${port}/v1` }
        }
      )
      term = t
      await t.waitFor(/\n› $/m, 40_000)
      t.type("say hello\r")
      await t.waitFor(/retrying in [34] s: rate limited \(429\)/)
      await t.waitFor(/retrying in [12] s: rate limited \(429\)/)
      await t.waitFor("After the wait: hello.")
      expect(requests).toBe(2)
      t.type("\x04")
      await t.exited
    } finally {
      server.close()
    }
  })
})
