/**
 * OpenTelemetry from the built `muse`: a local HTTP server speaks OTLP/HTTP (JSON and protobuf)
 * and receives what a scripted crew session sends — the span tree (session → turn → model call /
 * tool call → crew task → the member's turn → …), the attributes (model, tokens, cost, tool, exit
 * code, bytes, agent), the metrics — and that a replay sends nothing and a resume after a crash
 * sends no span of what the first run had sent.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bin, buggyRepo, ensureBuilt, museAsync, readLog, type Sandbox, sandbox, writeScript } from "./support/cli.js"

/**
 * `muse` run without blocking this process: the collector that receives what it sends lives here
 * (a synchronous spawn would keep it from answering until muse gave up sending).
 */
const muse = (
  args: ReadonlyArray<string>,
  options: { readonly sb: Sandbox; readonly cwd: string; readonly env?: NodeJS.ProcessEnv }
): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], {
      cwd: options.cwd,
      env: { ...options.sb.env, ...options.env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d))
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
    const timer = setTimeout(() => child.kill("SIGKILL"), 90_000)
    child.on("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })

interface Received {
  readonly path: string
  readonly contentType: string
  readonly body: Buffer
}

/** A collector on 127.0.0.1 that keeps every request. */
const collector = async () => {
  const received: Array<Received> = []
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      received.push({
        path: req.url ?? "",
        contentType: String(req.headers["content-type"] ?? ""),
        body: Buffer.concat(chunks)
      })
      res.writeHead(200, { "content-type": req.headers["content-type"] ?? "application/json" }).end("{}")
    })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { url, received, close: () => new Promise<void>((r) => server.close(() => r())) }
}

interface Span {
  readonly name: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly startTimeUnixNano: string
  readonly endTimeUnixNano: string
  readonly attributes: Record<string, unknown>
  readonly status?: { code?: number; message?: string }
}

const value = (v: any): unknown =>
  v.stringValue ??
  (v.intValue !== undefined ? Number(v.intValue) : undefined) ??
  v.doubleValue ??
  v.boolValue ??
  v.arrayValue?.values?.map(value)

const spansOf = (received: ReadonlyArray<Received>): Array<Span> =>
  received
    .filter((r) => r.path === "/v1/traces")
    .flatMap((r) => JSON.parse(r.body.toString("utf8")).resourceSpans)
    .flatMap((rs: any) => rs.scopeSpans.flatMap((ss: any) => ss.spans))
    .map((s: any) => ({
      ...s,
      attributes: Object.fromEntries((s.attributes ?? []).map((a: any) => [a.key, value(a.value)]))
    }))

const metricsOf = (received: ReadonlyArray<Received>): Array<any> =>
  received
    .filter((r) => r.path === "/v1/metrics")
    .flatMap((r) => JSON.parse(r.body.toString("utf8")).resourceMetrics)
    .flatMap((rm: any) => rm.scopeMetrics.flatMap((sm: any) => sm.metrics))

const crewScript = {
  replies: [
    {
      agent: "main",
      when: "Crew reports",
      steps: [
        { text: "Merging.", tools: [{ name: "worktree_merge", params: { agent: "worker-1", message: "notes" } }] },
        { text: "Merged the notes." }
      ]
    },
    {
      agent: "main",
      when: "write the notes",
      steps: [
        {
          text: "Handing it to a worker.",
          usage: { input: 2400, output: 60 },
          tools: [{ name: "delegate", params: { to: "worker", task: "write NOTES.md" } }]
        },
        { text: "A worker is on it." }
      ]
    },
    {
      agent: "worker",
      when: "NOTES",
      steps: [
        { tools: [{ name: "write_file", params: { path: "NOTES.md", content: "# Notes\n" } }] },
        { tools: [{ name: "run_shell", params: { command: "cat NOTES.md && exit 3" } }] },
        { text: "Wrote NOTES.md." }
      ]
    },
    {
      agent: "reviewer",
      steps: [
        { tools: [{ name: "verdict", params: { worker: "worker-1", verdict: "approve", critique: "fine" } }] },
        { text: "Approved." }
      ]
    }
  ]
}

beforeAll(() => ensureBuilt(), 240_000)

describe("muse with OTEL_EXPORTER_OTLP_ENDPOINT", () => {
  let c: Awaited<ReturnType<typeof collector>>
  beforeAll(async () => {
    c = await collector()
  })
  afterAll(async () => {
    await c.close()
  })

  it("a crew session sends its span tree with the log's times and attributes, and its metrics", async () => {
    c.received.length = 0
    const sb = sandbox({ OTEL_EXPORTER_OTLP_ENDPOINT: c.url, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" })
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "crew", crewScript)
    const r = await muse(
      ["run", "write the notes", "--script", script, "--approval-mode", "auto", "--output-format", "json"],
      {
        sb,
        cwd: repo
      }
    )
    expect(r.code, r.stderr).toBe(0)
    const session = JSON.parse(r.stdout).session
    const log = readLog(sb, session)
    const spans = spansOf(c.received)
    const byId = new Map(spans.map((s) => [s.spanId, s]))
    const parentOf = (s: Span) => (s.parentSpanId ? byId.get(s.parentSpanId) : undefined)
    // every span but the session's has its parent among them; all carry the session id
    const roots = spans.filter((s) => !s.parentSpanId)
    expect(roots.map((s) => s.name)).toEqual(["muse.session"])
    const root = roots[0]!
    expect(root.attributes).toMatchObject({
      "muse.session.id": session,
      "muse.command": "run",
      "gen_ai.request.model": "scripted/crew"
    })
    for (const s of spans) {
      if (s !== root) expect(parentOf(s), s.name).toBeDefined()
      expect(s.attributes["muse.session.id"]).toBe(session)
    }
    // one span per model call and per tool call, each with the times its events were recorded at
    const models = spans.filter((s) => s.name.startsWith("chat "))
    const requests = log.filter((e) => e.type === "model.requested")
    expect(models).toHaveLength(requests.length)
    const tools = spans.filter((s) => s.name.startsWith("execute_tool ") || s.name === "muse.merge")
    expect(tools).toHaveLength(log.filter((e) => e.type === "tool.started").length)
    for (const e of log.filter((x) => x.type === "model.responded")) {
      const intent = log.find((x) => x.id === e.parent)!
      const span = models.find(
        (s) => s.startTimeUnixNano === String(BigInt(intent.at) * 1_000_000n) && s.attributes["muse.agent"] === e.agent
      )
      expect(span, `model call at seq ${intent.seq}`).toBeDefined()
      expect(span!.endTimeUnixNano).toBe(String(BigInt(e.at) * 1_000_000n))
      expect(span!.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted/crew",
        "gen_ai.usage.input_tokens": e.data.usage.inputTokens,
        "gen_ai.usage.output_tokens": e.data.usage.outputTokens,
        "gen_ai.usage.cache_read.input_tokens": 0
      })
    }
    // the tree: session → main's turn → delegate → the worker's task → its turn → its calls
    const delegate = tools.find((s) => s.name === "execute_tool delegate")!
    expect(parentOf(delegate)?.name).toBe("muse.turn")
    expect(parentOf(parentOf(delegate)!)).toBe(root)
    const task = spans.find((s) => s.name === "invoke_agent worker-1")!
    expect(parentOf(task)).toBe(delegate)
    expect(task.attributes).toMatchObject({
      "gen_ai.agent.name": "worker-1",
      "muse.task.status": "completed",
      "muse.review.verdict": "approve"
    })
    const shell = tools.find((s) => s.name === "execute_tool run_shell")!
    expect(shell.attributes).toMatchObject({
      "muse.agent": "worker-1",
      "gen_ai.tool.name": "run_shell",
      "muse.tool.exit_code": 3,
      "muse.tool.effect": "exec"
    })
    expect(shell.attributes["muse.tool.bytes"]).toBeGreaterThan(0)
    const workerTurn = parentOf(shell)!
    expect(workerTurn.name).toBe("muse.turn")
    expect(workerTurn.attributes["muse.agent"]).toBe("worker-1")
    expect(parentOf(workerTurn)).toBe(task)
    const review = spans.find((s) => s.name === "invoke_agent reviewer-1")!
    expect(review.attributes["muse.task.kind"]).toBe("review")
    const merge = tools.find((s) => s.name === "muse.merge")!
    expect(merge.attributes).toMatchObject({ "muse.agent": "main", "muse.merge.agent": "worker-1" })
    expect(merge.attributes["muse.merge.commit"]).toMatch(/^[0-9a-f]{40}$/)
    // main's two turns (the task, then the crew's report), both inside the session
    expect(
      spans.filter((s) => s.name === "muse.turn" && s.attributes["muse.agent"] === "main").map((s) => parentOf(s))
    ).toEqual([root, root])

    // metrics: the tokens of every call, by kind
    const metrics = metricsOf(c.received)
    const tokenPoints = metrics.filter((m) => m.name === "muse.tokens").flatMap((m) => m.sum.dataPoints)
    const last = new Map<string, number>()
    for (const p of tokenPoints) {
      const attrs = Object.fromEntries(p.attributes.map((a: any) => [a.key, value(a.value)]))
      last.set(`${attrs.agent} ${attrs.kind}`, Number(p.asInt ?? p.asDouble))
    }
    const input = (agent: string) =>
      log
        .filter((e) => e.type === "model.responded" && e.agent === agent)
        .reduce((n, e) => n + e.data.usage.inputTokens, 0)
    expect(last.get("main input")).toBe(input("main"))
    expect(last.get("worker-1 input")).toBe(input("worker-1"))
    expect(metrics.some((m) => m.name === "muse.tool.duration")).toBe(true)
  }, 120_000)

  it("a replay sends nothing; a resume after a crash sends no span the first run sent", async () => {
    c.received.length = 0
    const sb = sandbox({
      OTEL_EXPORTER_OTLP_ENDPOINT: c.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_BSP_SCHEDULE_DELAY: "100"
    })
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "slow", {
      replies: [
        {
          when: "check",
          steps: [
            { text: "Reading.", tools: [{ name: "read_file", params: { path: "sum.js" } }] },
            { text: "Waiting.", tools: [{ name: "run_shell", params: { command: "sleep 30" } }] },
            { text: "Done." }
          ]
        }
      ]
    })
    const p = museAsync(
      [
        "run",
        "check the sum",
        "--script",
        script,
        "--approval-mode",
        "auto",
        "--no-crew",
        "--output-format",
        "stream-json"
      ],
      {
        sb,
        cwd: repo
      }
    )
    const session = (await p.waitForLine((l) => l.kind === "session")).session as string
    await p.waitForLine(
      (l) => l.kind === "event" && l.event.type === "tool.started" && l.event.data.tool === "run_shell"
    )
    // what was done before the crash has been sent (spans go out every 100 ms here): the read and
    // the two model calls (a span ended but not yet sent when a process is killed is lost with it)
    const deadline = Date.now() + 20_000
    const sentSoFar = () =>
      spansOf(c.received).filter((s) => s.name === "execute_tool read_file" || s.name.startsWith("chat "))
    while (sentSoFar().length < 3 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50))
    }
    p.child.kill("SIGKILL")
    await p.exited
    const first = spansOf(c.received)
    expect(first.map((s) => s.name)).toContain("execute_tool read_file")
    // the session's span, the turn and the shell command never ended in that run: none of them was sent
    expect(first.map((s) => s.name)).not.toContain("execute_tool run_shell")

    c.received.length = 0
    const v = await muse(["replay", session, "--verify"], { sb, cwd: repo })
    expect(v.code, v.stderr).toBe(0)
    await new Promise((r) => setTimeout(r, 300))
    expect(c.received).toEqual([])

    const r = await muse(["resume", session, "--script", script, "--output-format", "json"], { sb, cwd: repo })
    expect(r.code, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout).text).toBe("Done.")
    const second = spansOf(c.received)
    const key = (s: Span) => `${s.name} ${s.startTimeUnixNano}`
    const sentBefore = new Set(first.map(key))
    expect(second.filter((s) => sentBefore.has(key(s))).map(key)).toEqual([])
    // the resume sent the command the crash cut short (settled as interrupted, timed from its intent), the turn and the rest
    const log = readLog(sb, session)
    const shellIntent = log.find((e) => e.type === "tool.started" && e.data.tool === "run_shell")
    const shell = second.find((s) => s.name === "execute_tool run_shell")
    expect(shell?.startTimeUnixNano).toBe(String(BigInt(shellIntent.at) * 1_000_000n))
    expect(shell?.status?.code).toBe(2)
    const session2 = second.find((s) => s.name === "muse.session")
    expect(session2?.attributes).toMatchObject({ "muse.command": "resume", "muse.session.resumed": true })
    // every model call of the log was sent once, by one of the two runs
    const calls = [...first, ...second].filter((s) => s.name.startsWith("chat "))
    expect(calls).toHaveLength(log.filter((e) => e.type === "model.responded").length)
  }, 120_000)

  it("sends OTLP protobuf by default, and nothing at all when telemetry is not set", async () => {
    c.received.length = 0
    const sb = sandbox({ OTEL_EXPORTER_OTLP_ENDPOINT: c.url })
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "hi", { steps: [{ text: "Hello." }] })
    const r = await muse(["run", "say hello", "--script", script, "--no-crew"], { sb, cwd: repo })
    expect(r.code, r.stderr).toBe(0)
    const traces = c.received.filter((x) => x.path === "/v1/traces")
    expect(traces.length).toBeGreaterThan(0)
    expect(traces[0]!.contentType).toBe("application/x-protobuf")
    // the protobuf holds the span names as bytes
    expect(Buffer.concat(traces.map((t) => t.body)).includes("muse.session")).toBe(true)

    c.received.length = 0
    const quiet = sandbox()
    const r2 = await muse(
      ["run", "say hello", "--script", writeScript(quiet, "hi", { steps: [{ text: "Hello." }] }), "--no-crew"],
      {
        sb: quiet,
        cwd: buggyRepo(quiet.root)
      }
    )
    expect(r2.code, r2.stderr).toBe(0)
    expect(c.received).toEqual([])
  }, 120_000)

  it("refuses a gRPC protocol or an endpoint that is not http(s), before the session starts", async () => {
    const sb = sandbox({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4317", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })
    const repo = buggyRepo(sb.root)
    const r = await muse(
      ["run", "say hello", "--script", writeScript(sb, "hi", { steps: [{ text: "Hello." }] }), "--no-crew"],
      { sb, cwd: repo }
    )
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('protocol "grpc" is not supported')
    const bad = await muse(
      ["run", "say hello", "--script", writeScript(sb, "hi", { steps: [{ text: "Hello." }] }), "--no-crew"],
      {
        sb,
        cwd: repo,
        env: { OTEL_EXPORTER_OTLP_PROTOCOL: "", OTEL_EXPORTER_OTLP_ENDPOINT: "ftp://collector" }
      }
    )
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("is not an http(s) URL")
    expect(fs.existsSync(`${sb.state}/sessions`) ? fs.readdirSync(`${sb.state}/sessions`) : []).toEqual([])
  })
})
