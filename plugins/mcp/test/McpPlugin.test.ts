import * as fs from "node:fs"
import * as path from "node:path"
import type { Response } from "@effect/ai"
import type { Approvals, Event } from "@musekit/core"
import { inputs, type RouteContext, routed, Scripted, scriptedModel } from "@musekit/core/testing"
import { EventLogFile, SessionRuntime } from "@musekit/node"
import { McpPlugin, McpServers } from "@musekit/plugin-mcp"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { everything, filesystem, misbehaving, startHttpEverything, stdio, tmpDir, waitFor } from "./servers.js"

const run = <A, E>(eff: Effect.Effect<A, E>) => Effect.runPromise(eff)

type Step = (c: RouteContext) => ReadonlyArray<Response.PartEncoded>

/**
 * A main agent that makes the given calls, one model turn each, then ends its turn (every user
 * input starts the list again at the step given by the number of tool results it has seen).
 */
const steps = (calls: ReadonlyArray<{ name: string; params: unknown }>, final = "done") =>
  routed({
    main: (c) => {
      const lastUser = c.prompt.content.map((m) => m.role).lastIndexOf("user")
      const sinceUser = c.prompt.content.slice(lastUser).filter((m) => m.role === "tool").length
      const call = calls[sinceUser]
      return call ? Scripted.toolCalls([{ id: `call_${sinceUser}`, ...call }]) : Scripted.text(final)
    }
  })

interface Outcome {
  readonly events: ReadonlyArray<Event.Envelope>
  readonly asked: ReadonlyArray<Approvals.Request>
  readonly output: ReadonlyArray<string>
}

const completed = (events: ReadonlyArray<Event.Envelope>) =>
  events
    .filter((e) => e.type === "tool.completed")
    .map((e) => e.data as { tool: string; isFailure: boolean; result: any })

/** A session over the real file log with the MCP plugin of `servers`, answered by `script`. */
const session = async (options: {
  readonly root: string
  readonly dir: string
  readonly id: string
  readonly servers: McpServers.Service
  readonly discovery: McpServers.Discovery
  readonly script: Step | ReturnType<typeof routed>
  readonly texts: ReadonlyArray<string>
  readonly resume?: boolean
  readonly allow?: boolean
  readonly onToolOutput?: (chunk: string) => void
}): Promise<Outcome> => {
  const asked: Array<Approvals.Request> = []
  const output: Array<string> = []
  const plugin = await run(McpPlugin.make({ discovery: options.discovery, servers: options.servers }))
  const io: SessionRuntime.Io = {
    input: inputs(options.texts),
    prompter: {
      ask: (r) =>
        Effect.sync(() => {
          asked.push(r)
          return { allow: options.allow ?? true, scope: "once" as const }
        })
    },
    onToolOutput: (_id, chunk) => Effect.sync(() => options.onToolOutput?.(chunk))
  }
  const services: SessionRuntime.Services = {
    languageModel: scriptedModel([options.script as never]).layer,
    plugins: [plugin]
  }
  if (options.resume) {
    await run(SessionRuntime.resume({ session: options.id, dir: options.dir, io, services }))
  } else {
    const config = SessionRuntime.config({
      root: options.root,
      model: "scripted/mcp",
      approvalMode: "auto-edit",
      crew: false,
      plugins: [McpPlugin.name],
      discovered: { mcp: options.discovery }
    })
    await run(SessionRuntime.start({ config, session: options.id, dir: options.dir, io, services }))
  }
  const events = await run(EventLogFile.readSession(options.id, { dir: options.dir }))
  return { events, asked, output }
}

/** The discovery a session recorded. */
const recorded = (events: ReadonlyArray<Event.Envelope>) =>
  ((events[0]!.data as { config: SessionRuntime.Config }).config.discovered as { mcp: McpServers.Discovery }).mcp

const replay = (dir: string, id: string, servers?: McpServers.Service) =>
  Effect.gen(function* () {
    const events = yield* EventLogFile.readSession(id, { dir })
    const plugin = yield* McpPlugin.make({ discovery: recorded(events), servers })
    return yield* SessionRuntime.replay({ session: id, dir, verify: true, plugins: [plugin] })
  })

describe("MCP servers as tools in a session", () => {
  it("lists and calls the tools of server-everything and server-filesystem; a replay needs neither; a resume starts them again", async () => {
    const root = tmpDir()
    const dir = tmpDir("muse-mcp-state-")
    fs.writeFileSync(path.join(root, "notes.txt"), "hello from a file\n")
    const servers = McpServers.make({ servers: { everything: everything(), fs: filesystem(root) }, cwd: root })
    const discovery = await run(servers.start)
    expect(discovery.servers.map((s) => [s.name, s.status])).toEqual([
      ["everything", "connected"],
      ["fs", "connected"]
    ])
    const first = await session({
      root,
      dir,
      id: "s1",
      servers,
      discovery,
      texts: ["use the MCP tools"],
      script: steps([
        { name: "mcp__everything__echo", params: { message: "hello mcp" } },
        { name: "mcp__everything__get-sum", params: { a: 2, b: 3 } },
        { name: "mcp__fs__read_text_file", params: { path: path.join(root, "notes.txt") } },
        { name: "mcp__fs__write_file", params: { path: path.join(root, "out.txt"), content: "written by mcp\n" } },
        { name: "mcp__everything__echo", params: {} }
      ])
    })
    const results = completed(first.events)
    expect(results.map((r) => [r.tool, r.isFailure])).toEqual([
      ["mcp__everything__echo", false],
      ["mcp__everything__get-sum", false],
      ["mcp__fs__read_text_file", false],
      ["mcp__fs__write_file", false]
    ])
    expect(results[0]!.result.text).toBe("Echo: hello mcp")
    expect(results[1]!.result.text).toContain("The sum of 2 and 3 is 5")
    expect(results[2]!.result.text).toBe("hello from a file\n")
    expect(fs.readFileSync(path.join(root, "out.txt"), "utf8")).toBe("written by mcp\n")
    // read-only, closed-world tools of a local server ran in auto-edit; the write asked first
    expect(first.asked.map((r) => [r.tool, r.effect])).toEqual([["mcp__fs__write_file", "exec"]])
    // arguments that do not fit the server's JSON schema never reach it
    const rejected = first.events.find((e) => e.type === "tool.rejected")!.data as { reason: string }
    expect(rejected.reason).toContain("must have required property 'message'")
    // the model saw each tool with the server's schema
    const requested = first.events.find((e) => e.type === "model.requested")!.data as { tools: Array<string> }
    expect(requested.tools).toEqual(expect.arrayContaining(["mcp__everything__echo", "mcp__fs__write_file"]))
    expect(recorded(first.events)).toEqual(discovery)
    const pidsBefore = (await run(servers.status)).map((s) => s.pid)
    await run(servers.close)

    // replay: the servers cannot start (their programs are gone), and nothing asks them
    const gone = McpServers.make({
      servers: { everything: stdio([path.join(root, "missing.js")]), fs: stdio([path.join(root, "missing.js")]) },
      cwd: root
    })
    fs.rmSync(path.join(root, "out.txt"))
    const report = await run(replay(dir, "s1", gone))
    expect(report.matched).toBe(first.events.length)
    expect((await run(gone.status)).map((s) => s.state)).toEqual(["idle", "idle"])
    expect(fs.existsSync(path.join(root, "out.txt"))).toBe(false)
    // and with no servers at all
    expect((await run(replay(dir, "s1"))).matched).toBe(first.events.length)

    // resume: the recorded tools, served by servers started again in the background
    const again = McpServers.make({ servers: { everything: everything(), fs: filesystem(root) }, cwd: root })
    await run(again.startInBackground)
    const second = await session({
      root,
      dir,
      id: "s1",
      servers: again,
      discovery: recorded(first.events),
      resume: true,
      texts: ["once more"],
      script: steps([{ name: "mcp__everything__echo", params: { message: "after resume" } }])
    })
    const after = completed(second.events.slice(first.events.length))
    expect(after.map((r) => [r.tool, r.isFailure, r.result.text])).toEqual([
      ["mcp__everything__echo", false, "Echo: after resume"]
    ])
    const status = await run(again.status)
    expect(status.find((s) => s.name === "everything")!.state).toBe("connected")
    expect(status.find((s) => s.name === "everything")!.pid).not.toBe(pidsBefore[0])
    await run(again.close)
    expect((await run(replay(dir, "s1"))).matched).toBe(second.events.length)
  })

  it("a server killed in the middle of a call is an error to the model; the next call starts it again", async () => {
    const root = tmpDir()
    const dir = tmpDir("muse-mcp-state-")
    const servers = McpServers.make({ servers: { everything: everything() }, cwd: root })
    const discovery = await run(servers.start)
    let progressed = false
    const outcome = session({
      root,
      dir,
      id: "kill",
      servers,
      discovery,
      texts: ["run the long operation"],
      onToolOutput: () => {
        progressed = true
      },
      script: steps([
        { name: "mcp__everything__trigger-long-running-operation", params: { duration: 30, steps: 30 } },
        { name: "mcp__everything__echo", params: { message: "still here" } }
      ])
    })
    await waitFor(() => progressed, 20_000, "progress from the long-running operation")
    const killed = (await run(servers.status))[0]!.pid
    expect(killed).toBeGreaterThan(0)
    process.kill(killed!, "SIGKILL")
    const { events } = await outcome
    const results = completed(events)
    expect(results[0]).toMatchObject({ tool: "mcp__everything__trigger-long-running-operation", isFailure: true })
    expect(results[0]!.result.error).toMatch(
      /MCP server "everything" stopped while trigger-long-running-operation was running/
    )
    expect(results[1]).toMatchObject({
      tool: "mcp__everything__echo",
      isFailure: false,
      result: { text: "Echo: still here" }
    })
    const status = (await run(servers.status))[0]!
    expect(status.state).toBe("connected")
    expect(status.pid).not.toBe(killed)
    // the model was told, and the turn finished normally
    const turn = events.find((e) => e.type === "turn.completed")!.data as { status: string; text: string }
    expect(turn).toMatchObject({ status: "completed", text: "done" })
    await run(servers.close)
    expect((await run(replay(dir, "kill"))).matched).toBe(events.length)
  })

  it("a call that outlives its timeout is cancelled and reported; the session goes on", async () => {
    const root = tmpDir()
    const dir = tmpDir("muse-mcp-state-")
    // no progress notifications (one step), so nothing resets the 400 ms timeout
    const servers = McpServers.make({ servers: { slow: everything({ timeout: 400 }) }, cwd: root })
    const discovery = await run(servers.start)
    const { events } = await session({
      root,
      dir,
      id: "timeout",
      servers,
      discovery,
      texts: ["go"],
      script: steps([
        { name: "mcp__slow__trigger-long-running-operation", params: { duration: 5, steps: 1 } },
        { name: "mcp__slow__echo", params: { message: "quick" } }
      ])
    })
    const results = completed(events)
    expect(results[0]!.isFailure).toBe(true)
    expect(results[0]!.result.error).toMatch(
      /MCP server "slow" did not finish trigger-long-running-operation within 0\.4 s; the call was cancelled/
    )
    expect(results[0]!.result.error).toContain('"timeout"')
    expect(results[1]).toMatchObject({ isFailure: false, result: { text: "Echo: quick" } })
    await run(servers.close)
  })

  it("start failures, schema-invalid results, failures and a crashing server are clear errors; the others go on", async () => {
    const root = tmpDir()
    const dir = tmpDir("muse-mcp-state-")
    const servers = McpServers.make({
      servers: {
        odd: misbehaving(),
        missing: { transport: "stdio", command: "muse-no-such-server", args: [], env: {}, source: "/p/.muse/mcp.json" },
        quits: stdio(["-e", "console.error('cannot open the database'); process.exit(2)"]),
        needsenv: {
          transport: "stdio",
          command: "${MUSE_TEST_UNSET_SERVER_BIN}",
          args: [],
          env: {},
          source: "/p/.muse/mcp.json"
        },
        everything: everything()
      },
      cwd: root,
      env: {}
    })
    const discovery = await run(servers.start)
    const byName = Object.fromEntries(discovery.servers.map((s) => [s.name, s]))
    expect(byName.missing).toMatchObject({ status: "failed", tools: [] })
    expect(byName.missing!.error).toBe(
      'MCP server "missing" could not be started: the command "muse-no-such-server" was not found (check "command" for "missing" in /p/.muse/mcp.json).'
    )
    expect(byName.quits!.error).toMatch(
      /could not be started: it exited before it answered .*Its last output: cannot open the database/
    )
    expect(byName.needsenv!.error).toMatch(
      /was not started: the environment variable MUSE_TEST_UNSET_SERVER_BIN is not set/
    )
    expect(byName.everything!.status).toBe("connected")
    const { events } = await session({
      root,
      dir,
      id: "odd",
      servers,
      discovery,
      texts: ["try them"],
      script: steps([
        { name: "mcp__odd__bad_structured", params: {} },
        { name: "mcp__odd__not_a_result", params: {} },
        { name: "mcp__odd__fails", params: {} },
        { name: "mcp__odd__exits", params: {} },
        { name: "mcp__everything__echo", params: { message: "fine" } }
      ])
    })
    const results = completed(events)
    expect(results.map((r) => [r.tool, r.isFailure])).toEqual([
      ["mcp__odd__bad_structured", true],
      ["mcp__odd__not_a_result", true],
      ["mcp__odd__fails", true],
      ["mcp__odd__exits", true],
      ["mcp__everything__echo", false]
    ])
    expect(results[0]!.result.error).toMatch(
      /MCP server "odd" answered bad_structured with a result that does not match the tool's own output schema/
    )
    expect(results[1]!.result.error).toMatch(
      /MCP server "odd" answered not_a_result with something that is not a valid MCP tool result: content/
    )
    expect(results[2]!.result.error).toBe("fails (MCP server odd) failed: disk full")
    expect(results[3]!.result.error).toMatch(
      /MCP server "odd" stopped while exits was running.*Its last output: fatal: lost my mind/s
    )
    // the servers that never started offer no tools
    const offered = (events.find((e) => e.type === "model.requested")!.data as { tools: Array<string> }).tools
    expect(offered.filter((t) => t.startsWith("mcp__")).map((t) => t.split("__")[1])).toEqual(
      expect.arrayContaining(["odd", "everything"])
    )
    expect(offered.some((t) => /^mcp__(missing|quits|needsenv)__/.test(t))).toBe(false)
    expect(events.find((e) => e.type === "turn.completed")!.data).toMatchObject({ status: "completed" })
    await run(servers.close)
  })

  it("a Streamable HTTP server on 127.0.0.1: its tools are network tools that ask, and the session replays without it", async () => {
    const root = tmpDir()
    const dir = tmpDir("muse-mcp-state-")
    const http = await startHttpEverything()
    const servers = McpServers.make({
      servers: { remote: { transport: "http", url: http.url, headers: { "X-Test": "1" }, source: "test config" } },
      cwd: root
    })
    const discovery = await run(servers.start)
    expect(discovery.servers[0]).toMatchObject({ name: "remote", transport: "http", status: "connected" })
    const first = await session({
      root,
      dir,
      id: "http",
      servers,
      discovery,
      texts: ["ask the remote server"],
      script: steps([
        { name: "mcp__remote__echo", params: { message: "over http" } },
        { name: "mcp__remote__get-sum", params: { a: 40, b: 2 } }
      ])
    })
    const results = completed(first.events)
    expect(results.map((r) => [r.isFailure, r.result.text])).toEqual([
      [false, "Echo: over http"],
      [false, "The sum of 40 and 2 is 42."]
    ])
    // a remote server's tools send their arguments off the machine: they ask, whatever the server says of them
    expect(first.asked.map((r) => [r.tool, r.effect])).toEqual([
      ["mcp__remote__echo", "network"],
      ["mcp__remote__get-sum", "network"]
    ])
    await run(servers.close)
    http.child.kill("SIGKILL")
    await waitFor(() => http.child.exitCode !== null || http.child.signalCode !== null, 10_000, "the server to stop")
    expect((await run(replay(dir, "http"))).matched).toBe(first.events.length)
  })

  it("a refused call never reaches the server", async () => {
    const root = tmpDir()
    const dir = tmpDir("muse-mcp-state-")
    const servers = McpServers.make({ servers: { fs: filesystem(root) }, cwd: root })
    const discovery = await run(servers.start)
    const { events, asked } = await session({
      root,
      dir,
      id: "deny",
      servers,
      discovery,
      allow: false,
      texts: ["write"],
      script: steps([{ name: "mcp__fs__write_file", params: { path: path.join(root, "x.txt"), content: "no" } }])
    })
    expect(asked).toHaveLength(1)
    expect(events.some((e) => e.type === "tool.started")).toBe(false)
    expect(fs.existsSync(path.join(root, "x.txt"))).toBe(false)
    await run(servers.close)
  })
})
