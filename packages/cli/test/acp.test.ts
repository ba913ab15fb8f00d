/**
 * `muse acp` driven the way an editor drives it: the built binary as a child process, spoken to
 * with the ACP SDK's own client side.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Readable, Writable } from "node:stream"
import * as acp from "@agentclientprotocol/sdk"
import { Sandbox as OsSandbox } from "@musekit/node"
import { beforeAll, describe, expect, it } from "vitest"
import {
  bin,
  buggyRepo,
  ensureBuilt,
  muse,
  pathWithout,
  readLog,
  type Sandbox,
  sandbox,
  writeScript
} from "./support/cli.js"

beforeAll(() => ensureBuilt(), 240_000)

interface Editor {
  readonly child: ChildProcess
  readonly agent: acp.ClientContext
  readonly updates: Array<acp.SessionNotification>
  readonly permissions: Array<acp.RequestPermissionRequest>
  /** How the next permission questions are answered (`reject`, `allow`, `session`). */
  answers: Array<string>
  readonly stderr: () => string
  readonly close: () => Promise<void>
}

/** Terminals as an editor runs them (`terminal/*`): real processes, their output kept. */
const terminals = () => {
  const made: Array<{ command: string; args: ReadonlyArray<string>; cwd: string | null | undefined }> = []
  const running = new Map<
    string,
    { output: string; exit: Promise<{ exitCode: number | null; signal: string | null }>; child: ChildProcess }
  >()
  return {
    made,
    create: (p: acp.CreateTerminalRequest) => {
      const id = `term-${made.length + 1}`
      made.push({ command: p.command, args: p.args ?? [], cwd: p.cwd })
      const child = spawn(p.command, p.args ?? [], { cwd: p.cwd ?? undefined, stdio: ["ignore", "pipe", "pipe"] })
      const entry = {
        output: "",
        child,
        exit: new Promise<{ exitCode: number | null; signal: string | null }>((resolve) =>
          child.on("close", (exitCode, signal) => resolve({ exitCode, signal }))
        )
      }
      child.stdout!.on("data", (d: Buffer) => (entry.output += d.toString()))
      child.stderr!.on("data", (d: Buffer) => (entry.output += d.toString()))
      running.set(id, entry)
      return { terminalId: id }
    },
    output: (id: string) => ({ output: running.get(id)!.output, truncated: false }),
    waitForExit: (id: string) => running.get(id)!.exit,
    kill: (id: string) => {
      running.get(id)?.child.kill("SIGTERM")
      return {}
    },
    release: (id: string) => {
      running.get(id)?.child.kill("SIGKILL")
      running.delete(id)
      return {}
    }
  }
}

/**
 * An editor's file system (`fs/*`): open buffers (absolute path → text, unsaved changes included)
 * over the files on disk; each write the agent hands over is kept, and saved to disk as an editor does.
 */
const editorFiles = () => {
  const buffers = new Map<string, string>()
  const written: Array<{ path: string; content: string }> = []
  return {
    buffers,
    written,
    read: (p: acp.ReadTextFileRequest) => {
      const text = buffers.get(p.path) ?? fs.readFileSync(p.path, "utf8")
      return { content: text }
    },
    write: (p: acp.WriteTextFileRequest) => {
      written.push({ path: p.path, content: p.content })
      buffers.set(p.path, p.content)
      fs.writeFileSync(p.path, p.content)
      return {}
    }
  }
}

/** Start `muse acp` and connect to it as an editor would (initialize included). */
const editor = async (
  sb: Sandbox,
  args: ReadonlyArray<string>,
  cwd: string,
  term?: ReturnType<typeof terminals>,
  files?: ReturnType<typeof editorFiles>,
  options: { readonly notices?: boolean; readonly env?: NodeJS.ProcessEnv } = {}
): Promise<Editor> => {
  const child = spawn(process.execPath, [bin, "acp", ...args], {
    cwd,
    env: { ...sb.env, ...options.env },
    stdio: ["pipe", "pipe", "pipe"]
  })
  let stderr = ""
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d))
  const updates: Array<acp.SessionNotification> = []
  const permissions: Array<acp.RequestPermissionRequest> = []
  const self: { answers: Array<string> } = { answers: [] }
  const stream = acp.ndJsonStream(
    Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>,
    Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>
  )
  let app = acp.client({ name: "test-editor" })
  if (term) {
    app = app
      .onRequest("terminal/create", ({ params }) => term.create(params))
      .onRequest("terminal/output", ({ params }) => term.output(params.terminalId))
      .onRequest("terminal/wait_for_exit", ({ params }) => term.waitForExit(params.terminalId))
      .onRequest("terminal/kill", ({ params }) => term.kill(params.terminalId))
      .onRequest("terminal/release", ({ params }) => term.release(params.terminalId))
  }
  if (files) {
    app = app
      .onRequest("fs/read_text_file", ({ params }) => files.read(params))
      .onRequest("fs/write_text_file", ({ params }) => files.write(params))
  }
  const connection = app
    .onNotification("session/update", ({ params }) => {
      updates.push(params)
    })
    .onRequest("session/request_permission", ({ params }) => {
      permissions.push(params)
      const answer = self.answers.shift() ?? "reject"
      return { outcome: { outcome: "selected", optionId: answer } }
    })
    .connect(stream)
  const init = await connection.agent.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientInfo: { name: "test-editor", version: "1.0.0" },
    clientCapabilities: {
      fs: { readTextFile: files !== undefined, writeTextFile: files !== undefined },
      terminal: term !== undefined,
      ...(options.notices === false ? {} : { session: { notices: {} } })
    }
  })
  expect(init.agentCapabilities?.loadSession).toBe(true)
  return Object.assign(self, {
    child,
    agent: connection.agent,
    updates,
    permissions,
    stderr: () => stderr,
    close: async () => {
      connection.close()
      child.stdin!.end()
      if (child.exitCode === null && child.signalCode === null) {
        await new Promise<void>((resolve) => {
          const t = setTimeout(() => {
            child.kill("SIGKILL")
            resolve()
          }, 10_000)
          child.on("exit", () => {
            clearTimeout(t)
            resolve()
          })
        })
      }
    }
  })
}

const waitFor = async (check: () => boolean, what: string, ms = 30_000) => {
  const until = Date.now() + ms
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

const kinds = (updates: ReadonlyArray<acp.SessionNotification>) => updates.map((u) => u.update.sessionUpdate)
const texts = (updates: ReadonlyArray<acp.SessionNotification>, kind = "agent_message_chunk") =>
  updates
    .filter((u) => u.update.sessionUpdate === kind)
    .map((u) => (u.update as { content: { text?: string } }).content.text ?? "")
    .join("")

describe("muse acp", () => {
  it("a prompt whose tool call needs permission: granted it runs, refused it does not; the session is a muse session", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "acp", {
      replies: [
        {
          when: "marker",
          steps: [
            {
              text: "Creating the marker.",
              tools: [{ name: "run_shell", params: { command: "echo made > marker.txt" } }]
            },
            { text: "Done with the marker." }
          ]
        }
      ]
    })
    const ed = await editor(sb, ["--script", script], repo)
    try {
      const { sessionId } = await ed.agent.request("session/new", { cwd: repo, mcpServers: [] })
      expect(sessionId).toMatch(/^\d{8}-\d{6}-[0-9a-f]{6}$/)

      ed.answers.push("allow")
      const first = await ed.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "make the marker" }]
      })
      expect(first.stopReason).toBe("end_turn")
      expect(fs.readFileSync(path.join(repo, "marker.txt"), "utf8")).toBe("made\n")
      expect(ed.permissions).toHaveLength(1)
      const asked = ed.permissions[0]!
      expect(asked.sessionId).toBe(sessionId)
      expect(asked.toolCall).toMatchObject({ kind: "execute", status: "pending", title: "$ echo made > marker.txt" })
      expect(asked.options.map((o) => o.kind)).toEqual(expect.arrayContaining(["allow_once", "reject_once"]))
      const calls = ed.updates.filter((u) => u.update.sessionUpdate === "tool_call")
      expect(calls).toHaveLength(1)
      const call = calls[0]!.update as acp.ToolCall
      expect(call.toolCallId).toBe(asked.toolCall.toolCallId)
      const done = ed.updates.filter(
        (u) => u.update.sessionUpdate === "tool_call_update" && (u.update as acp.ToolCallUpdate).status === "completed"
      )
      expect(done.map((u) => (u.update as acp.ToolCallUpdate).toolCallId)).toEqual([call.toolCallId])
      expect(texts(ed.updates)).toBe("Creating the marker.Done with the marker.")

      fs.rmSync(path.join(repo, "marker.txt"))
      const before = ed.updates.length
      ed.answers.push("reject")
      const second = await ed.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "make the marker again" }]
      })
      expect(second.stopReason).toBe("end_turn")
      expect(ed.permissions).toHaveLength(2)
      expect(fs.existsSync(path.join(repo, "marker.txt"))).toBe(false)
      const refused = ed.updates
        .slice(before)
        .filter((u) => u.update.sessionUpdate === "tool_call_update")
        .map((u) => u.update as acp.ToolCallUpdate)
      expect(refused.map((u) => u.status)).toEqual(["failed"])
      expect(JSON.stringify(refused[0]!.content)).toContain("refused in the editor")
    } finally {
      await ed.close()
    }
    // the editor's session is a muse session like any other
    const log = readLog(
      sb,
      fs
        .readdirSync(path.join(sb.state, "sessions"))
        .find((f) => f.endsWith(".jsonl"))!
        .slice(0, -6)
    )
    const session = log[0].data.config
    expect(session.root).toBe(fs.realpathSync(repo))
    const list = muse(["sessions", "--json"], { sb })
    expect(list.code, list.stderr).toBe(0)
    const id = JSON.parse(list.stdout.trim().split("\n")[0]!).id
    expect(log.filter((e: any) => e.type === "user.input").map((e: any) => e.data.text)).toEqual([
      "make the marker",
      "make the marker again"
    ])
    const replay = muse(["replay", id, "--verify"], { sb })
    expect(replay.code, replay.stderr).toBe(0)
  })

  it("with the editor's file system: read_file sees unsaved changes, an edit over them is refused, a written file is handed to the editor", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const sum = path.join(fs.realpathSync(repo), "sum.js")
    const test = path.join(fs.realpathSync(repo), "sum.test.js")
    const script = writeScript(sb, "editor-fs", {
      replies: [
        {
          when: "look",
          steps: [
            {
              text: "Reading.",
              tools: [
                { name: "read_file", params: { path: "sum.js" } },
                { name: "read_file", params: { path: "sum.test.js" } }
              ]
            },
            {
              text: "Editing.",
              tools: [
                { name: "edit_file", params: { path: "sum.js", edits: [{ old_text: "a - b", new_text: "a + b" }] } },
                {
                  name: "edit_file",
                  params: { path: "sum.test.js", edits: [{ old_text: "2, 3), 5", new_text: "2, 2), 4" }] }
                }
              ]
            },
            { text: "Done." }
          ]
        }
      ]
    })
    const files = editorFiles()
    // the user typed in sum.js and has not saved; sum.test.js is open and clean
    files.buffers.set(sum, "export const sum = (a, b) => a * b // typing\n")
    files.buffers.set(test, fs.readFileSync(test, "utf8"))
    const ed = await editor(sb, ["--script", script, "--approval-mode", "auto"], repo, undefined, files)
    try {
      const { sessionId } = await ed.agent.request("session/new", { cwd: repo, mcpServers: [] })
      const r = await ed.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "look at sum" }] })
      expect(r.stopReason).toBe("end_turn")
      const log = readLog(sb, sessionId)
      const done = log.filter((e: any) => e.type === "tool.completed").map((e: any) => e.data)
      expect(
        done,
        JSON.stringify(
          log
            .filter((e: any) => e.type.startsWith("tool") || e.type.startsWith("approval"))
            .map((e: any) => [e.type, e.data])
        )
      ).toHaveLength(4)
      // the unsaved buffer is what the model read, and it is told so
      expect(done[0].result.content).toBe("     1\texport const sum = (a, b) => a * b // typing")
      expect(done[0].result.note).toMatch(/unsaved changes/)
      // a clean buffer reads as the file on disk, with no note
      expect(done[1].result.content).toContain("assert.strictEqual(sum(2, 3), 5)")
      expect(done[1].result.note).toBeUndefined()
      // the edit over unsaved changes is refused and writes nothing; the other edit lands and reaches the editor
      expect(done[2].isFailure).toBe(true)
      expect(JSON.stringify(done[2].result)).toMatch(/sum\.js has unsaved changes in the editor; nothing was written/)
      expect(fs.readFileSync(sum, "utf8")).toBe("export const sum = (a, b) => a - b\n")
      expect(files.buffers.get(sum)).toBe("export const sum = (a, b) => a * b // typing\n")
      expect(done[3].isFailure).toBe(false)
      expect(fs.readFileSync(test, "utf8")).toContain("assert.strictEqual(sum(2, 2), 4)")
      expect(files.written).toEqual([{ path: test, content: fs.readFileSync(test, "utf8") }])
      const list = muse(["sessions", "--json"], { sb })
      const id = JSON.parse(list.stdout.trim().split("\n")[0]!).id
      const replay = muse(["replay", id, "--verify"], { sb })
      expect(replay.code, replay.stderr).toBe(0)
    } finally {
      await ed.close()
    }
  })

  it("session/cancel stops the turn in the middle of a tool call; the next prompt is answered", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "cancel", {
      replies: [
        // first: after the interrupted call, "hello" follows a tool result in the history
        { when: "hello", steps: [{ text: "Hello again." }] },
        {
          when: "slow",
          steps: [
            { text: "Waiting.", tools: [{ name: "run_shell", params: { command: "sleep 30; echo late > late.txt" } }] },
            { text: "Finished waiting." }
          ]
        }
      ]
    })
    const ed = await editor(sb, ["--script", script, "--approval-mode", "auto"], repo)
    try {
      const { sessionId } = await ed.agent.request("session/new", { cwd: repo, mcpServers: [] })
      const started = Date.now()
      const turn = ed.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "be slow" }] })
      await waitFor(
        () =>
          ed.updates.some(
            (u) =>
              (u.update.sessionUpdate === "tool_call" || u.update.sessionUpdate === "tool_call_update") &&
              (u.update as acp.ToolCall).status === "in_progress"
          ),
        "the shell call to start"
      )
      await ed.agent.notify("session/cancel", { sessionId })
      const result = await turn
      expect(result.stopReason).toBe("cancelled")
      expect(Date.now() - started).toBeLessThan(25_000)
      const next = await ed.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hello" }] })
      expect(next.stopReason).toBe("end_turn")
      expect(texts(ed.updates)).toContain("Hello again.")
      expect(fs.existsSync(path.join(repo, "late.txt"))).toBe(false)
      const log = readLog(sb, sessionId)
      expect(log.some((e: any) => e.type === "turn.interrupted")).toBe(true)
      expect(log.filter((e: any) => e.type === "user.input").map((e: any) => e.data.text)).toEqual(["be slow", "hello"])
    } finally {
      await ed.close()
    }
  })

  it("session/load after kill -9: the conversation comes back, and the session goes on", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "load", {
      replies: [
        {
          when: "first",
          steps: [
            { text: "Reading.", tools: [{ name: "read_file", params: { path: "sum.js" } }] },
            { text: "It subtracts." }
          ]
        },
        {
          when: "second",
          steps: [
            { text: "Waiting.", tools: [{ name: "run_shell", params: { command: "sleep 30" } }] },
            { text: "Waited." }
          ]
        },
        { when: "third", steps: [{ text: "Third answer." }] }
      ]
    })
    const args = ["--script", script, "--approval-mode", "auto"]
    const one = await editor(sb, args, repo)
    const { sessionId } = await one.agent.request("session/new", { cwd: repo, mcpServers: [] })
    expect(
      (await one.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "first" }] })).stopReason
    ).toBe("end_turn")
    void one.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "second" }] }).catch(() => {})
    await waitFor(
      () => readLog(sb, sessionId).some((e: any) => e.type === "tool.started" && e.data.tool === "run_shell"),
      "the second turn's shell call"
    )
    one.child.kill("SIGKILL")
    await one.close()

    const two = await editor(sb, args, repo)
    try {
      await two.agent.request("session/load", { sessionId, cwd: repo, mcpServers: [] })
      // the conversation as recorded, before load answered
      expect(texts(two.updates, "user_message_chunk")).toBe("firstsecond")
      expect(texts(two.updates)).toContain("It subtracts.")
      expect(kinds(two.updates)).toContain("tool_call")
      const third = await two.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "third" }] })
      expect(third.stopReason).toBe("end_turn")
      expect(texts(two.updates)).toContain("Third answer.")
    } finally {
      await two.close()
    }
    const log = readLog(sb, sessionId)
    expect(log.filter((e: any) => e.type === "user.input").map((e: any) => e.data.text)).toEqual([
      "first",
      "second",
      "third"
    ])
    // the shell call cut short by the kill was settled, not left hanging
    const shell = log.find((e: any) => e.type === "tool.started" && e.data.tool === "run_shell")
    expect(log.some((e: any) => e.type === "tool.completed" && e.parent === shell.id)).toBe(true)
    const replay = muse(["replay", sessionId, "--verify"], { sb })
    expect(replay.code, replay.stderr).toBe(0)
  })

  it("/plan: the plan's steps are plan entries, updated as the steps run after the editor approves it", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const step = (id: string, file: string) => ({ id, intent: `Create ${file}`, verify: `${file} exists` })
    const script = writeScript(sb, "plan", {
      replies: [
        {
          when: "Carry out step s1",
          steps: [
            { tools: [{ name: "write_file", params: { path: "notes/a.txt", content: "a\n" } }] },
            { text: "Wrote it.\nSTEP STATUS: done" }
          ]
        },
        {
          when: "Carry out step s2",
          steps: [
            { tools: [{ name: "write_file", params: { path: "notes/b.txt", content: "b\n" } }] },
            { text: "Wrote it.\nSTEP STATUS: done" }
          ]
        },
        {
          when: "two notes",
          steps: [
            {
              tools: [
                {
                  name: "submit_plan",
                  params: { title: "Two notes", steps: [step("s1", "notes/a.txt"), step("s2", "notes/b.txt")] }
                }
              ]
            },
            { text: "Plan submitted." }
          ]
        }
      ]
    })
    const ed = await editor(sb, ["--script", script, "--no-crew"], repo)
    try {
      const { sessionId } = await ed.agent.request("session/new", { cwd: repo, mcpServers: [] })
      ed.answers.push("allow")
      const r = await ed.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "/plan write two notes" }]
      })
      expect(r.stopReason).toBe("end_turn")
      expect(ed.permissions[0]!.toolCall.title).toBe('Run the plan "Two notes" (2 steps)')
      const plans = ed.updates
        .filter((u) => u.update.sessionUpdate === "plan")
        .map((u) => (u.update as acp.Plan).entries.map((e) => `${e.content}: ${e.status}`).join(", "))
      expect(plans).toEqual([
        "Create notes/a.txt: pending, Create notes/b.txt: pending",
        "Create notes/a.txt: in_progress, Create notes/b.txt: pending",
        "Create notes/a.txt: completed, Create notes/b.txt: pending",
        "Create notes/a.txt: completed, Create notes/b.txt: in_progress",
        "Create notes/a.txt: completed, Create notes/b.txt: completed"
      ])
      expect(fs.readFileSync(path.join(repo, "notes/b.txt"), "utf8")).toBe("b\n")
      // the file changes came as diffs
      const diffs = ed.updates.flatMap((u) =>
        u.update.sessionUpdate === "tool_call_update"
          ? ((u.update as acp.ToolCallUpdate).content ?? []).filter((c) => c.type === "diff")
          : []
      )
      expect(diffs).toEqual([
        { type: "diff", path: path.join(fs.realpathSync(repo), "notes/a.txt"), oldText: null, newText: "a\n" },
        { type: "diff", path: path.join(fs.realpathSync(repo), "notes/b.txt"), oldText: null, newText: "b\n" }
      ])
    } finally {
      await ed.close()
    }
  })

  it("an editor that offers terminals runs run_shell in one (without the OS sandbox), shown with the tool call", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "term", {
      replies: [
        {
          when: "tests",
          steps: [
            {
              text: "Running them.",
              tools: [{ name: "run_shell", params: { command: "echo from the terminal; exit 3" } }]
            },
            { text: "They ran." }
          ]
        }
      ]
    })
    // in the OS sandbox the command runs in muse, never in the editor's terminal (which has the user's rights)
    if (OsSandbox.detect().available) {
      const boxed = terminals()
      const inBox = await editor(sb, ["--script", script, "--approval-mode", "auto"], repo, boxed)
      try {
        const id = (await inBox.agent.request("session/new", { cwd: repo, mcpServers: [] })).sessionId
        const r = await inBox.agent.request("session/prompt", {
          sessionId: id,
          prompt: [{ type: "text", text: "run the tests" }]
        })
        expect(r.stopReason).toBe("end_turn")
        expect(boxed.made).toEqual([])
      } finally {
        await inBox.close()
      }
    }
    const term = terminals()
    const ed = await editor(sb, ["--script", script, "--approval-mode", "auto", "--sandbox", "off"], repo, term)
    let sessionId = ""
    try {
      sessionId = (await ed.agent.request("session/new", { cwd: repo, mcpServers: [] })).sessionId
      const r = await ed.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: "run the tests" }]
      })
      expect(r.stopReason).toBe("end_turn")
      expect(term.made).toEqual([
        { command: "sh", args: ["-c", "echo from the terminal; exit 3"], cwd: fs.realpathSync(repo) }
      ])
      const shown = ed.updates.flatMap((u) =>
        u.update.sessionUpdate === "tool_call_update" ? ((u.update as acp.ToolCallUpdate).content ?? []) : []
      )
      expect(shown).toEqual([{ type: "terminal", terminalId: "term-1" }])
    } finally {
      await ed.close()
    }
    // the model got the result run_shell gives, recorded like any tool result
    const done = readLog(sb, sessionId).find((e: any) => e.type === "tool.completed")
    expect(done.data).toMatchObject({
      tool: "run_shell",
      isFailure: false,
      result: { exit_code: 3, output: "from the terminal\n", timed_out: false }
    })
    const replay = muse(["replay", sessionId, "--verify"], { sb })
    expect(replay.code, replay.stderr).toBe(0)
  })

  it("session/load of a session that does not exist is an error naming it", async () => {
    const sb = sandbox()
    const ed = await editor(sb, [], sb.root)
    try {
      await expect(
        ed.agent.request("session/load", { sessionId: "20990101-000000-abcdef", cwd: sb.root, mcpServers: [] })
      ).rejects.toThrow(/no such session: "20990101-000000-abcdef"/)
    } finally {
      await ed.close()
    }
  })

  it("muse's own warnings reach the editor as notices (or a message marked as muse's), never in the agent's text, once per connection", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    // a machine where no OS sandbox can run: muse says so
    const env = { PATH: pathWithout(sb.root, "bwrap") }
    const script = writeScript(sb, "notice", { replies: [{ when: "hi", steps: [{ text: "Hello." }] }] })
    for (const notices of [true, false]) {
      const ed = await editor(sb, ["--script", script], repo, undefined, undefined, { notices, env })
      try {
        const { sessionId } = await ed.agent.request("session/new", { cwd: repo, mcpServers: [] })
        const r = await ed.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hi" }] })
        expect(r.stopReason).toBe("end_turn")
        const own = ed.updates.filter(
          (u) => u.update.sessionUpdate === "notice" || (u.update as any)._meta?.["musekit/notice"] !== undefined
        )
        if (process.platform === "linux") {
          expect(own).toHaveLength(1)
          if (notices)
            expect(own[0]!.update).toMatchObject({
              sessionUpdate: "notice",
              severity: "warning",
              title: "no OS sandbox for shell commands"
            })
          else expect(kinds(own)).toEqual(["agent_message_chunk"])
          expect(JSON.stringify(own[0]!.update)).toContain("apt-get install bubblewrap")
        }
        // the agent's own text is the model's, whatever muse had to say
        const agentText = ed.updates
          .filter((u) => !own.includes(u))
          .filter((u) => u.update.sessionUpdate === "agent_message_chunk")
          .map((u) => (u.update as { content: { text?: string } }).content.text ?? "")
          .join("")
        expect(agentText).toBe("Hello.")
        // a second session on the same connection is not told again
        const before = ed.updates.length
        await ed.agent.request("session/new", { cwd: repo, mcpServers: [] })
        expect(ed.updates.slice(before).filter((u) => u.update.sessionUpdate === "notice")).toHaveLength(0)
      } finally {
        await ed.close()
      }
    }
  })
})
