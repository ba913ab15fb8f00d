import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, beforeAll, describe, expect, it } from "vitest"
import { bin, buggyRepo, ensureBuilt, muse, readLog, sandbox, writeScript } from "./support/cli.js"
import { type Session, spawnInTerminal } from "./support/terminal.js"

beforeAll(() => ensureBuilt(), 240_000)

const STREAMED = "The test expects sum(2, 3) to be 5, so let me read the code and ask an explorer who else calls it."

const script = {
  replies: [
    {
      agent: "main",
      when: "unit test fails",
      steps: [
        {
          text: STREAMED,
          chunkDelayMs: 40,
          tools: [
            { name: "read_file", params: { path: "sum.js" } },
            { name: "delegate", params: { to: "explorer", task: "Find every caller of sum()." } }
          ]
        },
        {
          text: "It subtracts. Fixing it:",
          tools: [{ name: "edit_file", params: { path: "sum.js", edits: [{ old_text: "a - b", new_text: "a + b" }] } }]
        },
        { text: "Running the tests.", tools: [{ name: "run_shell", params: { command: "npm test" } }] },
        { text: "Fixed: sum adds and npm test passes." }
      ]
    },
    {
      agent: "explorer",
      steps: [
        { text: "Searching.", tools: [{ name: "grep", params: { pattern: "sum\\(" } }] },
        { text: "Only sum.test.js calls sum()." }
      ]
    },
    { agent: "main", when: "take your time", steps: [{ text: "Thinking it all over…", delayMs: 120_000 }] },
    { agent: "main", when: "finished task", steps: [{ text: "Noted the explorer's report." }] },
    { agent: "main", steps: [{ text: "Hello again; the session goes on." }] }
  ]
}

let term: Session | undefined
afterEach(() => term?.kill())

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe("the interactive UI in a pseudo-terminal", () => {
  it("streams text, asks for approvals with the diff and the command, lists the crew, cancels a turn with Ctrl-C and exits", async () => {
    const sb = sandbox({ TERM: "xterm-256color" })
    const repo = buggyRepo(sb.root)
    const file = writeScript(sb, "tui", script)
    const t = spawnInTerminal(process.execPath, [bin, "--script", file, "--approval-mode", "ask"], {
      cwd: repo,
      env: sb.env,
      cols: 80,
      rows: 30
    })
    term = t
    await t.waitFor("Type a task, or /help")
    await t.waitFor("› ")
    t.type("The unit test fails. Fix it.\r")

    // the answer streams in: part of the sentence is on screen before the rest
    let sawPartial = false
    const start = Date.now()
    while (Date.now() - start < 20_000) {
      const text = t.all()
      if (text.includes(STREAMED.slice(0, 30)) && !text.includes("who else calls it.")) sawPartial = true
      if (text.includes("who else calls it.")) break
      await sleep(20)
    }
    expect(sawPartial).toBe(true)

    // the edit asks first and shows the exact diff
    await t.waitFor("main wants to change a file: edit_file sum.js (1 edit)")
    await t.waitFor("[y] yes")
    let screen = t.screen().join("\n")
    expect(screen).toContain("-export const sum = (a, b) => a - b")
    expect(screen).toContain("+export const sum = (a, b) => a + b")
    // the choices fit on one 80-column line
    expect(t.screen().find((l) => l.includes("[y] yes"))).toContain("[t] no, tell why")
    t.type("y")
    await t.waitFor("⎿ allowed once")
    await t.waitFor("⎿ sum.js +1 -1")

    // the command asks with the exact command line
    await t.waitFor("main wants to run: $ npm test")
    await t.waitFor(/\[y\] yes.*\n.*$/)
    t.type("y")
    await t.waitFor(/⎿ allowed once[\s\S]*⎿ allowed once/)
    await t.waitFor("⎿ exit 0")
    await t.waitFor("Fixed: sum adds and npm test passes.")
    await t.waitFor(/✓ done · \d+ model calls/)
    expect(fs.readFileSync(path.join(repo, "sum.js"), "utf8")).toBe("export const sum = (a, b) => a + b\n")
    // token totals in the status line
    await t.waitFor(/scripted\/tui · ask · .* · [\d,]+ tokens/)

    // /agents (completed with tab) lists the crew member the main agent delegated to
    await t.waitFor(/\n› $/m)
    t.type("/ag\t")
    await t.waitFor("› /agents")
    t.type("\r")
    await t.waitFor(/explorer-1\s+explorer\s+\w+/)
    screen = t.all()
    expect(screen).toMatch(/explorer-1\s+explorer\s+(idle|working)\s+1 task/)

    // Ctrl-C cancels the running turn; the session goes on
    const session = /session (\d{8}-\d{6}-[0-9a-f]{6})/.exec(t.all())![1]!
    t.type("take your time\r")
    await t.waitFor(/thinking · [\d.]+m?s/)
    // the model request of that turn is in flight (the script holds its answer for two minutes)
    const deadline = Date.now() + 20_000
    while (Date.now() < deadline) {
      const events = readLog(sb, session)
      const asked = events.findIndex((e) => e.type === "user.input" && e.data.text === "take your time")
      if (asked >= 0 && events.slice(asked).some((e) => e.type === "model.requested")) break
      await sleep(50)
    }
    t.type("\x03")
    await t.waitFor("■ interrupted")
    t.type("are you still there?\r")
    await t.waitFor("Hello again; the session goes on.")

    // leave with /exit
    t.type("/exit\r")
    const exit = await Promise.race([t.exited, sleep(20_000).then(() => ({ exitCode: -1 }))])
    expect(exit.exitCode).toBe(0)
    expect(t.all()).toContain(`continue it with: muse resume ${session}`)

    // the log holds the whole story, and the session replays exactly (Ctrl-C included)
    const types = readLog(sb, session).map((e) => e.type)
    expect(types).toContain("turn.interrupted")
    expect(types.filter((t) => t === "user.input")).toHaveLength(3)
    const v = muse(["replay", session, "--verify"], { sb, cwd: repo })
    expect(v.stderr).toMatch(/verified: (\d+) of \1 events/)
    expect(v.code).toBe(0)
  })

  it("Ctrl-D on an empty prompt exits; Ctrl-C twice exits", async () => {
    const sb = sandbox({ TERM: "xterm-256color" })
    const repo = buggyRepo(sb.root)
    const file = writeScript(sb, "tui", script)
    const a = spawnInTerminal(process.execPath, [bin, "--script", file], { cwd: repo, env: sb.env })
    term = a
    await a.waitFor("Type a task, or /help")
    await a.waitFor(/\n› $/m)
    a.type("\x04")
    expect((await a.exited).exitCode).toBe(0)

    const b = spawnInTerminal(process.execPath, [bin, "--script", file], { cwd: repo, env: sb.env })
    term = b
    await b.waitFor("Type a task, or /help")
    await b.waitFor(/\n› $/m)
    b.type("\x03")
    await b.waitFor("press ctrl-c again to exit")
    b.type("\x03")
    // the terminal may hand over the last output after it reports the exit
    await b.waitFor("continue it with: muse resume")
    expect((await b.exited).exitCode).toBe(0)
  })

  it("muse resume in a terminal shows where the session stopped and goes on", async () => {
    const sb = sandbox({ TERM: "xterm-256color" })
    const repo = buggyRepo(sb.root)
    const file = writeScript(sb, "tui", script)
    const run = muse(
      ["run", "The unit test fails. Fix it.", "--script", file, "--approval-mode", "auto", "--output-format", "json"],
      {
        sb,
        cwd: repo
      }
    )
    const session = JSON.parse(run.stdout).session as string
    const before = readLog(sb, session).length
    const t = spawnInTerminal(process.execPath, [bin, "resume", "--script", file], { cwd: repo, env: sb.env })
    term = t
    await t.waitFor(`resumed ${session}`)
    expect(t.all()).toContain("› The unit test fails. Fix it.")
    expect(t.all()).toContain("Fixed: sum adds and npm test passes.")
    await t.waitFor(/\n› $/m)
    t.type("anything else?\r")
    await t.waitFor("Hello again; the session goes on.")
    t.type("\x04")
    expect((await t.exited).exitCode).toBe(0)
    const after = readLog(sb, session)
    expect(after.length).toBeGreaterThan(before)
    expect(after.filter((e) => e.type === "user.input").map((e) => e.data.text)).toEqual([
      "The unit test fails. Fix it.",
      "anything else?"
    ])
  })
})
