/**
 * The user's path, end to end: the built `muse` binary (`node packages/cli/dist/bin.js run …`) against a
 * local model server over real HTTP, beside a peer coding agent's own CLI against the same server and
 * `node -e 0`, interleaved in one run.
 *
 * The server (this process) speaks the providers' streaming wire formats — Chat Completions SSE, Anthropic
 * Messages SSE, OpenAI Responses SSE — and answers at once: one `read_file` call (a 44-byte file) per reply
 * until the session holds N tool results, then a short text. Everything the figures say is measured at the
 * server or around the process:
 *
 * - **gap**: client time between the end of a model answer (the server's last byte) and the next request
 *   (its headers arriving) — tool run, logging, prompt building, encoding; median and p99 over the run;
 * - **marginal ms/turn**: (wall at the largest N − wall at the smallest N) / (difference in N);
 * - **start → first request**: spawn of the process until the first model request arrives; and the **CPU** the
 *   agent's processes (it and its children) had used by then (Linux, from `/proc`: steadier than wall time on a
 *   busy machine);
 * - **peak RSS** of the process (GNU time's maximum resident set size), and its **CPU** time (user + system, with
 *   its children), from which **marginal CPU ms/turn** (as marginal ms/turn; not stretched by waits for a core);
 * - **bytes/turn**: request body bytes sent per model call, mean over the run (and the last request).
 *
 * ```sh
 * pnpm bench e2e                                  # everything below, defaults
 * BENCH_E2E_TURNS=20,100,500 BENCH_E2E_ROUNDS=3   # tool calls per session; runs per case
 * BENCH_E2E_FORMATS=chat,anthropic,responses      # wire formats
 * BENCH_E2E_PEERS=pi                              # peers (installed by the bench), or "none"
 * BENCH_E2E_MUSE_ARGS="--no-crew"                 # extra flags for muse run
 * BENCH_E2E_BASELINE_BIN=../other/packages/cli/dist/bin.js  # another build of muse beside this one
 * BENCH_E2E_KEEP=1                                # keep the temp folder (muse's session logs) and print it
 * BENCH_E2E_DUMP=/tmp/bodies                      # write each session's 3rd and last request body there
 * ```
 *
 * Peers are installed with npm into `$TMPDIR/musekit-bench-peers/` (kept between runs; delete it to
 * reinstall). A peer that cannot be installed is reported and left out. The workspace is a fresh git
 * repository with one commit; every agent gets the same task, the same model window (1,000,000 tokens, from
 * its own configuration) and no API key of any real provider. Figures also go to `bench/out/e2e.json`.
 */
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Fake from "../packages/models/test/support/FakeServer.js"
import * as Wire from "../packages/models/test/support/wire.js"
import { fmtInt, fmtMs, median, percentile, printTable, writeFigures } from "./report.js"

export const description =
  "muse run over HTTP (Chat Completions, Anthropic, Responses) beside a peer CLI and node -e 0: gaps, ms/turn, start-up, RSS, bytes"

const list = (v: string | undefined, dflt: string) =>
  (v ?? dflt)
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "" && s !== "none")

const TURNS = list(process.env.BENCH_E2E_TURNS, "20,100,500")
  .map(Number)
  .sort((a, b) => a - b)
const ROUNDS = Number(process.env.BENCH_E2E_ROUNDS ?? 3)
const FORMATS = list(process.env.BENCH_E2E_FORMATS, "chat,anthropic,responses") as Array<Wire.Format>
const PEERS = list(process.env.BENCH_E2E_PEERS, "pi")
/** Node flags for every agent process (`--cpu-prof --cpu-prof-dir=/tmp/prof` to profile). */
const NODE_ARGS = list(process.env.BENCH_E2E_NODE_ARGS?.replace(/\s+/g, ","), "")
/** Another build's `packages/cli/dist/bin.js`, run beside this one as "muse (baseline)". */
const BASELINE_BIN = process.env.BENCH_E2E_BASELINE_BIN
const MUSE_ARGS = list(process.env.BENCH_E2E_MUSE_ARGS?.replace(/\s+/g, ","), "")
const WINDOW = 1_000_000
const TIMEOUT_MS = Number(process.env.BENCH_E2E_TIMEOUT_MS ?? 600_000)
const README = "# Bench\n\nA small file the agents read.\n\n" // 44 bytes
const TASK = "Read README.md again and again, as the tool results tell you, then say Done."

const root = fileURLToPath(new URL("../", import.meta.url))
const museBin = path.join(root, "packages", "cli", "dist", "bin.js")
const gnuTime = ["/usr/bin/time", "/bin/time"].find((p) => fs.existsSync(p))

// ---------------------------------------------------------------------------------------------
// The model server

const MODEL = { chat: "bench-model", anthropic: "claude-sonnet-4-5", responses: "gpt-4.1" } as const
const READ_TOOLS = ["read_file", "read", "Read"]
const endpoint = (url: string): Wire.Format | undefined =>
  url.endsWith("/chat/completions")
    ? "chat"
    : url.endsWith("/messages")
      ? "anthropic"
      : url.endsWith("/responses")
        ? "responses"
        : undefined

interface Session {
  readonly turns: number
  /** Tool results a stored response had seen (for `previous_response_id`). */
  readonly responses: Map<string, number>
  problem: string | undefined
  /** The agent's process, and the CPU its process tree had used when the first model request arrived. */
  pid?: number | undefined
  firstCpuMs?: number | undefined
  /** Where to write this session's request bodies (`BENCH_E2E_DUMP`), with the agent and format in the name. */
  dump?: string | undefined
}

let session: Session = { turns: 0, responses: new Map(), problem: undefined }
/** A folder to write the 3rd and the last request body of every session to, for comparing what agents send. */
const DUMP = process.env.BENCH_E2E_DUMP

const CLK_TCK = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100
  } catch {
    return 100
  }
})()

/** CPU time (user + system, with waited-for children) of a process and its descendants, from `/proc`. */
const treeCpuMs = (pid: number): number | undefined => {
  const ticks = (p: number): number => {
    const stat = fs.readFileSync(`/proc/${p}/stat`, "utf8")
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    let sum = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])
    for (const task of fs.readdirSync(`/proc/${p}/task`)) {
      const children = fs.readFileSync(`/proc/${p}/task/${task}/children`, "utf8").trim()
      for (const c of children === "" ? [] : children.split(" ")) {
        try {
          sum += ticks(Number(c))
        } catch {} // a child that just ended
      }
    }
    return sum
  }
  try {
    return (ticks(pid) * 1000) / CLK_TCK
  } catch {
    return undefined
  }
}

let responseIds = 0

const fail = (res: import("node:http").ServerResponse, message: string) => {
  session.problem ??= message
  res.writeHead(400, { "content-type": "application/json" })
  res.end(JSON.stringify({ error: { type: "invalid_request_error", message: `bench server: ${message}` } }))
}

const answer: Fake.Handler = (req, res, recorded) => {
  const format = endpoint(recorded.url)
  if (req.method === "GET" && /\/models$/.test(recorded.url)) {
    // as vLLM lists its model (an agent may ask for the window)
    res.writeHead(200, { "content-type": "application/json" })
    res.end(JSON.stringify({ object: "list", data: [{ id: MODEL.chat, object: "model", max_model_len: WINDOW }] }))
    return
  }
  if (format === undefined || req.method !== "POST") return fail(res, `unexpected ${req.method} ${recorded.url}`)
  if (session.firstCpuMs === undefined && session.pid !== undefined) session.firstCpuMs = treeCpuMs(session.pid)
  const body = recorded.body
  if (typeof body !== "object" || body === null) return fail(res, "the request body is not JSON")
  if (body.stream !== true) return fail(res, "the bench server answers streaming requests only")
  const wire = Wire.of(format)
  const previous = typeof body.previous_response_id === "string" ? body.previous_response_id : undefined
  const before = previous === undefined ? 0 : session.responses.get(previous)
  if (before === undefined) return fail(res, `unknown previous_response_id ${previous}`)
  const results = before + wire.toolResults(body)
  if (session.dump !== undefined && (results === 2 || results === session.turns)) {
    fs.writeFileSync(`${session.dump}-${results}.json`, JSON.stringify(body, null, 1))
  }
  const tool = READ_TOOLS.find((t) => wire.toolNames(body).includes(t))
  if (tool === undefined) return fail(res, `no read tool offered (tools: ${wire.toolNames(body).join(", ")})`)
  const id = `resp_${++responseIds}`
  session.responses.set(id, results)
  const usage = { input: Math.round(recorded.bytes / 4), output: 12 }
  const options = { id, model: MODEL[format], usage }
  const events =
    results < session.turns
      ? wire.toolCall({ id: `call_${results + 1}`, name: tool, args: { path: "README.md" } }, options)
      : wire.text("Done.", options)
  void Fake.sse(events, { gapMs: 0 })(req, res, recorded)
}

// ---------------------------------------------------------------------------------------------
// The agents

interface Command {
  readonly args: ReadonlyArray<string>
  readonly env: NodeJS.ProcessEnv
}

interface Agent {
  readonly name: string
  readonly formats: ReadonlyArray<Wire.Format>
  readonly command: (format: Wire.Format, base: string) => Command
}

const cleanEnv = (dir: string): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const k of ["PATH", "LANG", "TZ", "TMPDIR", "SYSTEMROOT"]) if (process.env[k]) env[k] = process.env[k]
  return { ...env, HOME: dir, XDG_CONFIG_HOME: path.join(dir, "config"), NO_COLOR: "1", CI: "1" }
}

const museAgent = (dir: string, name = "muse", bin = museBin): Agent => {
  const config = path.join(dir, "config", "muse", "config.json")
  fs.mkdirSync(path.dirname(config), { recursive: true })
  fs.writeFileSync(
    config,
    JSON.stringify({
      models: Object.fromEntries(
        [`openai-compatible/${MODEL.chat}`, `anthropic/${MODEL.anthropic}`, `openai/${MODEL.responses}`].map((m) => [
          m,
          { contextWindow: WINDOW }
        ])
      )
    })
  )
  return {
    name,
    formats: ["chat", "anthropic", "responses"],
    command: (format, base) => {
      const env: NodeJS.ProcessEnv = { ...cleanEnv(dir), MUSE_HOME: path.join(dir, "muse-state") }
      const spec =
        format === "chat"
          ? `openai-compatible/${MODEL.chat}`
          : format === "anthropic"
            ? `anthropic/${MODEL.anthropic}`
            : `openai/${MODEL.responses}`
      if (format === "chat") env.OPENAI_COMPATIBLE_BASE_URL = `${base}/v1`
      if (format === "anthropic") Object.assign(env, { ANTHROPIC_BASE_URL: base, ANTHROPIC_API_KEY: "bench-key" })
      if (format === "responses") Object.assign(env, { OPENAI_BASE_URL: `${base}/v1`, OPENAI_API_KEY: "bench-key" })
      return {
        args: [bin, "run", TASK, "--model", spec, "--output-format", "json", ...MUSE_ARGS],
        env
      }
    }
  }
}

const peersDir = path.join(os.tmpdir(), "musekit-bench-peers")

/** `npm install` a pinned package into its own folder under `peersDir` (once); the path of its bin. */
const installPeer = (pkg: string, version: string, bin: string): string => {
  const dir = path.join(peersDir, `${pkg.replace(/[@/]/g, "_")}-${version}`)
  const binPath = path.join(dir, "node_modules", ...pkg.split("/"), bin)
  if (fs.existsSync(binPath)) return binPath
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ private: true }))
  process.stdout.write(`installing ${pkg}@${version} into ${dir} …\n`)
  execFileSync(
    "npm",
    ["install", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error", `${pkg}@${version}`],
    { cwd: dir, stdio: ["ignore", "inherit", "inherit"] }
  )
  if (!fs.existsSync(binPath)) throw new Error(`${pkg}@${version} installed, but ${binPath} is missing`)
  return binPath
}

/** pi (badlogic/pi-mono), headless with `-p`, a custom provider per wire format in its models.json. */
const piAgent = (dir: string): Agent => {
  const cli = installPeer("@mariozechner/pi-coding-agent", "0.73.1", "dist/cli.js")
  const agentDir = path.join(dir, "pi-agent")
  const provider = (api: string, baseUrl: string, id: string) => ({
    baseUrl,
    api,
    apiKey: "bench-key",
    compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
    models: [{ id, contextWindow: WINDOW, maxTokens: 16_384, reasoning: false, input: ["text"] }]
  })
  return {
    name: "pi 0.73.1",
    formats: ["chat", "anthropic", "responses"],
    command: (format, base) => {
      fs.mkdirSync(agentDir, { recursive: true })
      fs.writeFileSync(
        path.join(agentDir, "models.json"),
        JSON.stringify({
          providers: {
            "bench-chat": provider("openai-completions", `${base}/v1`, MODEL.chat),
            "bench-anthropic": provider("anthropic-messages", base, MODEL.anthropic),
            "bench-responses": provider("openai-responses", `${base}/v1`, MODEL.responses)
          }
        })
      )
      return {
        args: [
          cli,
          "-p",
          "--mode",
          "json",
          "--provider",
          `bench-${format}`,
          "--model",
          MODEL[format],
          "--offline",
          "--no-extensions",
          "--no-skills",
          "--no-prompt-templates",
          "--no-themes",
          TASK
        ],
        env: { ...cleanEnv(dir), PI_CODING_AGENT_DIR: agentDir, PI_OFFLINE: "1" }
      }
    }
  }
}

const peerFactories: Record<string, (dir: string) => Agent> = { pi: piAgent }

// ---------------------------------------------------------------------------------------------
// One run

interface Run {
  readonly wallMs: number
  readonly firstRequestMs: number
  readonly firstRequestCpuMs: number | undefined
  readonly gaps: ReadonlyArray<number>
  readonly peakRssMiB: number | undefined
  /** The process's CPU time (user + system), from GNU time. */
  readonly cpuMs: number | undefined
  readonly requests: number
  readonly bytes: ReadonlyArray<number>
}

const spawnTimed = (
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  cwd: string,
  rssFile: string
): Promise<{ code: number | null; wallMs: number; t0: number; out: string }> =>
  new Promise((resolve, reject) => {
    const [cmd, ...rest] = gnuTime
      ? [gnuTime, "-f", "%M %U %S", "-o", rssFile, process.execPath, ...NODE_ARGS, ...args]
      : [process.execPath, ...NODE_ARGS, ...args]
    const t0 = performance.now()
    const child = spawn(cmd!, rest, { cwd, env, stdio: ["ignore", "pipe", "pipe"] })
    session.pid = child.pid
    let out = ""
    const keep = (d: Buffer) => {
      out = (out + d.toString("utf8")).slice(-8000)
    }
    child.stdout.on("data", keep)
    child.stderr.on("data", keep)
    const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS)
    child.on("error", reject)
    child.on("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, wallMs: performance.now() - t0, t0, out })
    })
  })

/** GNU time's last line: maximum resident set size (KiB), user and system seconds. */
const readTime = (file: string): { rssMiB: number | undefined; cpuMs: number | undefined } => {
  try {
    const [kb, user, sys] = fs.readFileSync(file, "utf8").trim().split("\n").pop()!.trim().split(/\s+/).map(Number)
    const cpu = (user ?? Number.NaN) + (sys ?? Number.NaN)
    return {
      rssMiB: kb !== undefined && Number.isFinite(kb) && kb > 0 ? kb / 1024 : undefined,
      cpuMs: Number.isFinite(cpu) ? cpu * 1000 : undefined
    }
  } catch {
    return { rssMiB: undefined, cpuMs: undefined }
  }
}

const runOnce = async (
  server: Fake.Listening,
  agent: Agent,
  format: Wire.Format,
  turns: number,
  workspace: string,
  scratch: string
): Promise<Run> => {
  session = { turns, responses: new Map(), problem: undefined }
  if (DUMP !== undefined) {
    fs.mkdirSync(DUMP, { recursive: true })
    session.dump = path.join(DUMP, `${agent.name.replace(/[^\w.-]+/g, "_")}-${format}-${turns}`)
  }
  server.requests.length = 0
  const { args, env } = agent.command(format, server.url)
  const rssFile = path.join(scratch, "rss.txt")
  fs.rmSync(rssFile, { force: true })
  const r = await spawnTimed(args, env, workspace, rssFile)
  const model = server.requests.filter((q) => endpoint(q.url) !== undefined)
  const done = model.length > 0 && session.problem === undefined && r.code === 0 && model.length === turns + 1
  if (!done) {
    throw new Error(
      `${agent.name} (${format}, ${turns} tool calls): exit ${r.code}, ${model.length} model requests (expected ${turns + 1})` +
        `${session.problem ? `; server: ${session.problem}` : ""}\n${r.out.slice(-3000)}`
    )
  }
  const gaps: Array<number> = []
  for (let i = 1; i < model.length; i++) gaps.push(model[i]!.receivedAt - model[i - 1]!.finishedAt!)
  return {
    wallMs: r.wallMs,
    firstRequestMs: model[0]!.receivedAt - r.t0,
    firstRequestCpuMs: session.firstCpuMs,
    gaps,
    ...(({ rssMiB, cpuMs }) => ({ peakRssMiB: rssMiB, cpuMs }))(readTime(rssFile)),
    requests: model.length,
    bytes: model.map((q) => q.bytes)
  }
}

const runBaseline = async (scratch: string): Promise<{ wallMs: number; peakRssMiB: number | undefined }> => {
  const rssFile = path.join(scratch, "rss.txt")
  fs.rmSync(rssFile, { force: true })
  const r = await spawnTimed(["-e", "0"], cleanEnv(scratch), scratch, rssFile)
  if (r.code !== 0) throw new Error(`node -e 0 exited with ${r.code}`)
  return { wallMs: r.wallMs, peakRssMiB: readTime(rssFile).rssMiB }
}

// ---------------------------------------------------------------------------------------------

const makeWorkspace = (dir: string): string => {
  const ws = path.join(dir, "workspace")
  fs.mkdirSync(ws, { recursive: true })
  fs.writeFileSync(path.join(ws, "README.md"), README)
  const git = (...a: Array<string>) => execFileSync("git", a, { cwd: ws, stdio: "ignore" })
  git("init", "-q")
  git("add", ".")
  git("-c", "user.email=bench@example.com", "-c", "user.name=bench", "commit", "-q", "-m", "init")
  return ws
}

interface Summary {
  readonly agent: string
  readonly format: Wire.Format
  readonly turns: number
  readonly runs: number
  readonly wallMs: number
  readonly firstRequestMs: number
  readonly firstRequestCpuMs: number | undefined
  readonly gapMedianMs: number
  readonly gapP99Ms: number
  readonly gapMaxMs: number
  readonly peakRssMiB: number | undefined
  readonly cpuMs: number | undefined
  readonly bytesPerRequest: number
  readonly lastRequestBytes: number
}

const summarize = (agent: string, format: Wire.Format, turns: number, runs: ReadonlyArray<Run>): Summary => {
  const rss = runs.flatMap((r) => (r.peakRssMiB === undefined ? [] : [r.peakRssMiB]))
  const cpu = runs.flatMap((r) => (r.firstRequestCpuMs === undefined ? [] : [r.firstRequestCpuMs]))
  const cpuTotal = runs.flatMap((r) => (r.cpuMs === undefined ? [] : [r.cpuMs]))
  return {
    agent,
    format,
    turns,
    runs: runs.length,
    wallMs: median(runs.map((r) => r.wallMs)),
    firstRequestMs: median(runs.map((r) => r.firstRequestMs)),
    firstRequestCpuMs: cpu.length > 0 ? median(cpu) : undefined,
    // per run, then the median run (a slow minute on a shared machine moves a whole run)
    gapMedianMs: median(runs.map((r) => median(r.gaps))),
    gapP99Ms: median(runs.map((r) => percentile(r.gaps, 0.99))),
    gapMaxMs: Math.max(...runs.map((r) => Math.max(...r.gaps))),
    peakRssMiB: rss.length > 0 ? median(rss) : undefined,
    cpuMs: cpuTotal.length > 0 ? median(cpuTotal) : undefined,
    bytesPerRequest: median(runs.map((r) => r.bytes.reduce((a, b) => a + b, 0) / r.bytes.length)),
    lastRequestBytes: median(runs.map((r) => r.bytes[r.bytes.length - 1]!))
  }
}

const ratio = (a: number, b: number | undefined) =>
  b === undefined || !Number.isFinite(b) || b === 0 ? "–" : `${(a / b).toFixed(2)}×`

export const run = async (): Promise<void> => {
  if (!fs.existsSync(museBin)) {
    process.stdout.write("building the CLI (packages/cli/dist/bin.js is missing) …\n")
    execFileSync("pnpm", ["--filter", "@musekit/cli", "build"], { cwd: root, stdio: "inherit" })
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-e2e-"))
  const scratch = path.join(dir, "scratch")
  fs.mkdirSync(scratch)
  const workspace = makeWorkspace(dir)
  const agents: Array<Agent> = [museAgent(dir)]
  // another build of muse beside this one, same run (before/after a change)
  if (BASELINE_BIN) agents.push(museAgent(dir, "muse (baseline)", path.resolve(BASELINE_BIN)))
  const skipped: Array<string> = []
  for (const name of PEERS) {
    const factory = peerFactories[name]
    if (!factory) {
      skipped.push(`${name}: unknown peer (known: ${Object.keys(peerFactories).join(", ")})`)
      continue
    }
    try {
      agents.push(factory(dir))
    } catch (e) {
      skipped.push(`${name}: ${(e as Error).message.split("\n")[0]}`)
    }
  }
  for (const s of skipped) process.stdout.write(`peer left out — ${s}\n`)
  const server = await Fake.listen({ fallback: answer })
  const loadBefore = os.loadavg()
  process.stdout.write(
    `uptime: ${execFileSync("uptime", { encoding: "utf8" }).trim()}\n` +
      `${ROUNDS} round(s); tool calls per session ${TURNS.join(", ")}; formats ${FORMATS.join(", ")}; ` +
      `agents ${agents.map((a) => a.name).join(", ")}${MUSE_ARGS.length ? `; muse flags ${MUSE_ARGS.join(" ")}` : ""}\n`
  )

  const runs = new Map<string, Array<Run>>()
  const failures: Array<string> = []
  const baseline: Array<{ wallMs: number; peakRssMiB: number | undefined }> = []
  const key = (a: string, f: string, n: number) => `${a}|${f}|${n}`
  try {
    // warm the file cache for every arm
    baseline.push(await runBaseline(scratch))
    for (const round of Array.from({ length: ROUNDS }, (_, i) => i)) {
      for (const turns of TURNS) {
        for (const format of FORMATS) {
          // alternate the order, so no agent always runs right after another
          const order = round % 2 === 0 ? agents : [...agents].reverse()
          baseline.push(await runBaseline(scratch))
          for (const agent of order) {
            if (!agent.formats.includes(format)) continue
            const k = key(agent.name, format, turns)
            if (failures.some((f) => f.startsWith(k))) continue
            try {
              const r = await runOnce(server, agent, format, turns, workspace, scratch)
              runs.set(k, [...(runs.get(k) ?? []), r])
              process.stdout.write(
                `  round ${round + 1} · ${agent.name} · ${format} · ${turns}: ${fmtMs(r.wallMs)}, first request ` +
                  `${fmtMs(r.firstRequestMs)} (CPU ${r.firstRequestCpuMs === undefined ? "–" : fmtMs(r.firstRequestCpuMs)}), gap p50 ${fmtMs(median(r.gaps))}\n`
              )
            } catch (e) {
              failures.push(`${k}: ${(e as Error).message}`)
              process.stdout.write(`  ${agent.name} · ${format} · ${turns} FAILED: ${(e as Error).message}\n`)
            }
          }
        }
      }
    }
  } finally {
    await server.close()
  }

  const nodeWall = median(baseline.slice(1).map((b) => b.wallMs))
  const nodeRss = median(baseline.flatMap((b) => (b.peakRssMiB === undefined ? [] : [b.peakRssMiB])))
  const summaries: Array<Summary> = []
  for (const [k, rs] of runs) {
    const [agent, format, turns] = k.split("|")
    summaries.push(summarize(agent!, format as Wire.Format, Number(turns), rs))
  }
  const find = (agent: string, format: string, turns: number) =>
    summaries.find((s) => s.agent === agent && s.format === format && s.turns === turns)
  const small = TURNS[0]!
  const large = TURNS[TURNS.length - 1]!
  const marginal = (agent: string, format: string) => {
    const a = find(agent, format, small)
    const b = find(agent, format, large)
    return a && b && large > small ? (b.wallMs - a.wallMs) / (large - small) : Number.NaN
  }
  // CPU time per turn: unlike wall time, it does not grow while the process waits for a core
  const marginalCpu = (agent: string, format: string) => {
    const a = find(agent, format, small)?.cpuMs
    const b = find(agent, format, large)?.cpuMs
    return a !== undefined && b !== undefined && large > small ? (b - a) / (large - small) : Number.NaN
  }

  for (const format of FORMATS) {
    const rows: Array<Array<string>> = []
    for (const agent of agents) {
      for (const turns of TURNS) {
        const s = find(agent.name, format, turns)
        if (!s) continue
        rows.push([
          agent.name,
          String(turns),
          fmtMs(s.wallMs),
          fmtMs(s.firstRequestMs),
          s.firstRequestCpuMs === undefined ? "–" : fmtMs(s.firstRequestCpuMs),
          fmtMs(s.gapMedianMs),
          fmtMs(s.gapP99Ms),
          fmtMs(s.gapMaxMs),
          s.cpuMs === undefined ? "–" : fmtMs(s.cpuMs),
          s.peakRssMiB === undefined ? "–" : `${s.peakRssMiB.toFixed(0)} MiB`,
          fmtInt(s.bytesPerRequest),
          fmtInt(s.lastRequestBytes)
        ])
      }
    }
    printTable(
      `${format}: median of ${ROUNDS} run(s) per row`,
      [
        "agent",
        "tool calls",
        "wall",
        "start → 1st request",
        "CPU to 1st request",
        "gap p50",
        "gap p99",
        "gap max",
        "CPU",
        "peak RSS",
        "bytes/request",
        "last request"
      ],
      rows
    )
  }

  const headline: Array<Array<string>> = []
  const peers = agents.slice(1)
  for (const format of FORMATS) {
    const m = find("muse", format, large)
    if (!m) continue
    const mm = marginal("muse", format)
    const row = (label: string, muse: number, unit: (x: number) => string, peer: (p: Agent) => number | undefined) => {
      headline.push([
        format,
        label,
        unit(muse),
        ...peers.map((p) => {
          const v = peer(p)
          return v === undefined || !Number.isFinite(v) ? "–" : `${unit(v)} (muse ${ratio(muse, v)})`
        })
      ])
    }
    row("gap median", m.gapMedianMs, fmtMs, (p) => find(p.name, format, large)?.gapMedianMs)
    row("gap p99", m.gapP99Ms, fmtMs, (p) => find(p.name, format, large)?.gapP99Ms)
    row(`marginal ms/turn (${small}→${large})`, mm, fmtMs, (p) => marginal(p.name, format))
    row(`marginal CPU ms/turn (${small}→${large})`, marginalCpu("muse", format), fmtMs, (p) =>
      marginalCpu(p.name, format)
    )
    row("start → first request", m.firstRequestMs, fmtMs, (p) => find(p.name, format, large)?.firstRequestMs)
    row(
      "CPU until first request",
      m.firstRequestCpuMs ?? Number.NaN,
      fmtMs,
      (p) => find(p.name, format, large)?.firstRequestCpuMs
    )
    row(
      `peak RSS at ${large}`,
      m.peakRssMiB ?? Number.NaN,
      (x) => `${x.toFixed(0)} MiB`,
      (p) => find(p.name, format, large)?.peakRssMiB
    )
    row(`bytes/request at ${large}`, m.bytesPerRequest, fmtInt, (p) => find(p.name, format, large)?.bytesPerRequest)
  }
  printTable(
    `headline at ${large} tool calls (node -e 0: ${fmtMs(nodeWall)}, ${nodeRss.toFixed(0)} MiB)`,
    ["format", "figure", "muse", ...peers.map((p) => p.name)],
    headline
  )
  const loadAfter = os.loadavg()
  process.stdout.write(
    `\nload average 1 min: ${loadBefore[0]!.toFixed(2)} before, ${loadAfter[0]!.toFixed(2)} after ` +
      `(${os.cpus().length} cores; figures from a busy machine are slower and noisier, read the ratios)\n` +
      `uptime: ${execFileSync("uptime", { encoding: "utf8" }).trim()}\n`
  )
  for (const f of failures) process.stdout.write(`\nFAILED ${f}\n`)
  const file = writeFigures("e2e", {
    rounds: ROUNDS,
    turns: TURNS,
    formats: FORMATS,
    agents: agents.map((a) => a.name),
    museArgs: MUSE_ARGS,
    skipped,
    failures,
    loadAverage: { before: loadBefore, after: loadAfter },
    nodeEmpty: { wallMs: nodeWall, peakRssMiB: nodeRss },
    summaries,
    marginal: Object.fromEntries(agents.flatMap((a) => FORMATS.map((f) => [`${a.name}|${f}`, marginal(a.name, f)]))),
    marginalCpu: Object.fromEntries(
      agents.flatMap((a) => FORMATS.map((f) => [`${a.name}|${f}`, marginalCpu(a.name, f)]))
    ),
    raw: Object.fromEntries(
      [...runs].map(([k, rs]) => [k, rs.map((r) => ({ ...r, gaps: r.gaps.map((g) => +g.toFixed(3)) }))])
    )
  })
  process.stdout.write(`\nfigures: ${path.relative(process.cwd(), file)}\n`)
  if (process.env.BENCH_E2E_KEEP === "1") process.stdout.write(`kept: ${dir}\n`)
  else fs.rmSync(dir, { recursive: true, force: true })
  if (failures.length > 0) process.exitCode = 1
}
