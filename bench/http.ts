/**
 * The HTTP client under a model call: `HttpClientNode` (`@musekit/node`, Node's `http` with
 * keep-alive) against `FetchHttpClient` (the runtime's `fetch`, what `Models.layer` uses), on the
 * same loopback server in the same run, rounds interleaved.
 *
 * Each call POSTs a JSON body of `BENCH_HTTP_BODY_KB` KB (112 unless set: a long conversation's
 * request) and reads a small server-sent-event answer as a stream to its end, as a streamed model
 * call does. The server is another process, so this process's CPU time is the client's alone:
 * CPU ms per call (user + system), medians over `BENCH_HTTP_ROUNDS` rounds (5) of
 * `BENCH_HTTP_CALLS` calls (500).
 *
 * Run with `pnpm bench http`. Figures also go to `bench/out/http.json`.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { FetchHttpClient, HttpBody, HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, type Layer, Stream } from "effect"
import { HttpClientNode } from "../packages/node/src/index.js"
import { fmtMs, median, printTable, writeFigures } from "./report.js"

export const description = "CPU per streamed model-sized call: HttpClientNode vs fetch"

const BODY_KB = Number(process.env.BENCH_HTTP_BODY_KB ?? 112)
const CALLS = Number(process.env.BENCH_HTTP_CALLS ?? 500)
const ROUNDS = Number(process.env.BENCH_HTTP_ROUNDS ?? 5)
const WARMUP = 50

// a Chat Completions-like answer: a few SSE events, one write each
const SERVER = `
const http = require("node:http")
const events = [
  ...Array.from({ length: 8 }, (_, i) => ({ choices: [{ index: 0, delta: { content: "word " + i + " " } }] })),
  { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }
].map((e) => "data: " + JSON.stringify(e) + "\\n\\n")
const server = http.createServer((req, res) => {
  req.resume()
  req.on("end", () => {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
    for (const e of events) res.write(e)
    res.end("data: [DONE]\\n\\n")
  })
})
server.keepAliveTimeout = 60000
server.listen(0, "127.0.0.1", () => process.stdout.write(String(server.address().port) + "\\n"))
`

const startServer = (): Promise<{ url: string; child: ChildProcess }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", SERVER], { stdio: ["ignore", "pipe", "inherit"] })
    child.once("error", reject)
    child.stdout!.once("data", (d: Buffer) => resolve({ url: `http://127.0.0.1:${d.toString().trim()}`, child }))
  })

const body = (kb: number): string => {
  const turn = { role: "user", content: "Read src/index.ts and tell me what it does. ".repeat(20) }
  const messages: Array<unknown> = []
  while (JSON.stringify(messages).length < kb * 1024) messages.push(turn)
  return JSON.stringify({ model: "fake-model", stream: true, messages })
}

const calls = (url: string, text: string, n: number) =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    for (let i = 0; i < n; i++) {
      const request = HttpClientRequest.post(`${url}/v1/chat/completions`, {
        body: HttpBody.text(text, "application/json")
      })
      yield* Effect.scoped(Effect.flatMap(client.execute(request), (r) => Stream.runDrain(Stream.decodeText(r.stream))))
    }
  })

const cpuMsPerCall = async (layer: Layer.Layer<HttpClient.HttpClient>, url: string, text: string, n: number) => {
  const before = process.cpuUsage()
  const t0 = performance.now()
  await Effect.runPromise(Effect.provide(calls(url, text, n), layer))
  const wall = performance.now() - t0
  const used = process.cpuUsage(before)
  return { cpu: (used.user + used.system) / 1000 / n, wall: wall / n }
}

export const run = async (): Promise<void> => {
  const { url, child } = await startServer()
  try {
    const text = body(BODY_KB)
    const clients: Array<[string, Layer.Layer<HttpClient.HttpClient>]> = [
      ["HttpClientNode", HttpClientNode.layer],
      ["fetch (FetchHttpClient)", FetchHttpClient.layer]
    ]
    for (const [, layer] of clients) await cpuMsPerCall(layer, url, text, WARMUP)
    const samples = new Map<string, { cpu: Array<number>; wall: Array<number> }>(
      clients.map(([name]) => [name, { cpu: [], wall: [] }])
    )
    for (let round = 0; round < ROUNDS; round++) {
      // alternate which goes first, so neither always runs on a warmer or quieter machine
      const order = round % 2 === 0 ? clients : [...clients].reverse()
      for (const [name, layer] of order) {
        const r = await cpuMsPerCall(layer, url, text, CALLS)
        samples.get(name)!.cpu.push(r.cpu)
        samples.get(name)!.wall.push(r.wall)
      }
    }
    const node = median(samples.get("HttpClientNode")!.cpu)
    const rows = clients.map(([name]) => {
      const s = samples.get(name)!
      const cpu = median(s.cpu)
      return [name, fmtMs(cpu), fmtMs(median(s.wall)), `${(cpu / node).toFixed(2)}×`]
    })
    printTable(
      `${BODY_KB} KB POST + streamed SSE answer, ${CALLS} calls × ${ROUNDS} rounds, interleaved (medians)`,
      ["client", "CPU per call", "wall per call", "CPU vs HttpClientNode"],
      rows
    )
    writeFigures("http", {
      bodyKb: BODY_KB,
      calls: CALLS,
      rounds: ROUNDS,
      clients: Object.fromEntries([...samples].map(([name, s]) => [name, s]))
    })
  } finally {
    child.kill()
  }
}
