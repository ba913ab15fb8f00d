/**
 * Video input: a 60 s 1920x1080@30 H.264 clip with 5 scene cuts turned into keyframes
 * (`Video.keyframes`, and the plugin's `transformPrompt` hook with an in-memory blob store), beside
 * a plain `ffmpeg -an -f null -` decode of the same file — the floor, since decoding is the cost.
 *
 * Reports medians of `BENCH_VIDEO_RUNS` runs (default 3): wall time and the CPU time of the ffmpeg
 * children (cutime + cstime of /proc/self/stat; steadier than wall time on a busy machine), each as
 * a ratio to the decode, and the peak RSS of the ffmpeg children (VmHWM from /proc, sampled every
 * 20 ms) and of this process.
 * The clip is made once (about 15 s) and kept in `bench/out/`.
 *
 * ```sh
 * pnpm bench video          # or on its own:
 * npx tsx bench/video.ts
 * ```
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { NodeContext } from "@effect/platform-node"
import { Effect } from "effect"
import { EventLog } from "../packages/core/src/index.js"
import { Video, VideoPlugin } from "../plugins/video/src/index.js"

export const description = "60 s 1080p30 H.264 → scene keyframes vs a plain ffmpeg decode (time, peak memory)"

const SECONDS = Number(process.env.BENCH_VIDEO_SECONDS ?? 60)
const RUNS = Math.max(1, Number(process.env.BENCH_VIDEO_RUNS ?? 3))
const outDir = fileURLToPath(new URL("./out/", import.meta.url))
const clipPath = path.join(outDir, `video-${SECONDS}s-1080p30.mp4`)

/** Six sources of SECONDS/6 each: five hard cuts, moving and still pictures. */
const SOURCES = ["testsrc2", "smptehdbars", "testsrc", "rgbtestsrc", "yuvtestsrc", "pal100bars"]

const exec = (cmd: string, args: ReadonlyArray<string>) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "ignore", "pipe"] })
    let err = ""
    child.stderr.on("data", (d) => {
      err += String(d)
    })
    child.on("error", reject)
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}: ${err}`))))
  })

const makeClip = async (): Promise<{ readonly made: boolean; readonly seconds: number }> => {
  if (fs.existsSync(clipPath)) return { made: false, seconds: 0 }
  fs.mkdirSync(outDir, { recursive: true })
  process.stdout.write(`making ${path.relative(process.cwd(), clipPath)} (${SECONDS} s 1920x1080@30, ~15 s)…\n`)
  const t0 = performance.now()
  const each = SECONDS / SOURCES.length
  const tmp = `${clipPath}.part.mp4`
  await exec("ffmpeg", [
    "-hide_banner",
    "-loglevel",
    "error",
    "-y",
    ...SOURCES.flatMap((s) => ["-f", "lavfi", "-i", `${s}=s=1920x1080:r=30:d=${each}`]),
    "-f",
    "lavfi",
    "-i",
    `sine=frequency=440:sample_rate=48000:duration=${SECONDS}`,
    "-filter_complex",
    `${SOURCES.map((_, i) => `[${i}:v]`).join("")}concat=n=${SOURCES.length}:v=1:a=0[v]`,
    "-map",
    "[v]",
    "-map",
    `${SOURCES.length}:a`,
    "-c:v",
    "libx264",
    "-preset",
    "veryfast",
    "-pix_fmt",
    "yuv420p",
    "-c:a",
    "aac",
    "-movflags",
    "+faststart",
    "-shortest",
    tmp
  ])
  fs.renameSync(tmp, clipPath)
  return { made: true, seconds: (performance.now() - t0) / 1000 }
}

// ---------------------------------------------------------------------------------------------
// Peak memory of child processes: VmHWM of every child of this process, sampled
// ---------------------------------------------------------------------------------------------

const readKb = (file: string, key: string): number | undefined => {
  try {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(fs.readFileSync(file, "utf8"))
    return m ? Number(m[1]) : undefined
  } catch {
    return undefined
  }
}

const comm = (pid: number) => {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim()
  } catch {
    return ""
  }
}

/** ffmpeg and ffprobe processes started by this process (not tsx's esbuild service). */
const childPids = (): Array<number> => {
  const pids: Array<number> = []
  try {
    for (const task of fs.readdirSync(`/proc/${process.pid}/task`)) {
      const text = fs.readFileSync(`/proc/${process.pid}/task/${task}/children`, "utf8").trim()
      if (text) pids.push(...text.split(/\s+/).map(Number))
    }
  } catch {
    // not Linux: no child figures
  }
  return pids.filter((pid) => /^ff(mpeg|probe)$/.test(comm(pid)))
}

/**
 * CPU seconds (user + system) of the children this process has waited for: fields cutime and
 * cstime of /proc/self/stat, in clock ticks (100 per second on Linux).
 */
const childCpuSeconds = (): number => {
  try {
    const stat = fs.readFileSync("/proc/self/stat", "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    // after "(comm) ", field 3 (state) is index 0, so cutime (16) and cstime (17) are 13 and 14
    return (Number(fields[13]) + Number(fields[14])) / 100
  } catch {
    return Number.NaN
  }
}

interface Sampled<A> {
  readonly value: A
  readonly ms: number
  /** CPU seconds used by the child processes. */
  readonly childCpu: number
  /** Largest VmHWM of a child process, in MiB. */
  readonly childPeakMiB: number
  readonly children: number
  /** Largest RSS of this process seen while it ran, in MiB. */
  readonly selfPeakMiB: number
}

const sampled = async <A>(work: () => Promise<A>): Promise<Sampled<A>> => {
  const peaks = new Map<number, number>()
  let selfPeak = process.memoryUsage().rss
  const sample = () => {
    for (const pid of childPids()) {
      const hwm = readKb(`/proc/${pid}/status`, "VmHWM")
      if (hwm !== undefined) peaks.set(pid, Math.max(peaks.get(pid) ?? 0, hwm))
    }
    selfPeak = Math.max(selfPeak, process.memoryUsage().rss)
  }
  const timer = setInterval(sample, 20)
  const cpu0 = childCpuSeconds()
  const t0 = performance.now()
  try {
    const value = await work()
    return {
      value,
      ms: performance.now() - t0,
      childCpu: childCpuSeconds() - cpu0,
      childPeakMiB: Math.max(0, ...peaks.values()) / 1024,
      children: peaks.size,
      selfPeakMiB: selfPeak / 2 ** 20
    }
  } finally {
    clearInterval(timer)
  }
}

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

const decodeOnly = () =>
  exec("ffmpeg", ["-hide_banner", "-nostdin", "-loglevel", "error", "-i", clipPath, "-an", "-f", "null", "-"])

const keyframes = () => Effect.runPromise(Video.keyframes(clipPath).pipe(Effect.provide(NodeContext.layer)))

const hook = () =>
  Effect.runPromise(
    VideoPlugin.transformPrompt()({
      agent: "main",
      content: [{ type: "text", text: "what happens in this video?" }],
      attachments: [{ path: clipPath }]
    }).pipe(Effect.provide(EventLog.layerMemory("bench-video")))
  )

interface Row {
  readonly name: string
  readonly medianMs: number
  readonly ratio: number
  readonly childCpuSeconds: number
  readonly cpuRatio: number
  readonly childPeakMiB: number
  readonly selfPeakMiB: number
  readonly processes: number
}

const measure = async <A>(name: string, work: () => Promise<A>, baseline?: Row) => {
  const runs: Array<Sampled<A>> = []
  for (let i = 0; i < RUNS; i++) runs.push(await sampled(work))
  const medianMs = median(runs.map((r) => r.ms))
  const childCpu = median(runs.map((r) => r.childCpu))
  const row: Row = {
    name,
    medianMs,
    ratio: baseline ? medianMs / baseline.medianMs : 1,
    childCpuSeconds: childCpu,
    cpuRatio: baseline ? childCpu / baseline.childCpuSeconds : 1,
    childPeakMiB: Math.max(...runs.map((r) => r.childPeakMiB)),
    selfPeakMiB: Math.max(...runs.map((r) => r.selfPeakMiB)),
    processes: runs[0]!.children
  }
  return { row, last: runs[runs.length - 1]!.value }
}

const printTable = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ")
  process.stdout.write(`${[line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n")}\n`)
}

export const run = async (): Promise<void> => {
  const clip = await makeClip()
  const metadata = await Effect.runPromise(Video.probe(clipPath).pipe(Effect.provide(NodeContext.layer)))
  process.stdout.write(
    `clip: ${Video.describe(metadata)}${clip.made ? ` (made in ${clip.seconds.toFixed(1)} s)` : ""}; ${RUNS} runs each\n\n`
  )
  const probe = await measure("Video.probe", () =>
    Effect.runPromise(Video.probe(clipPath).pipe(Effect.provide(NodeContext.layer)))
  )
  const base = await measure("ffmpeg -an -f null - (decode only)", decodeOnly)
  const frames = await measure("Video.keyframes (8 frames, 512 px)", keyframes, base.row)
  const viaHook = await measure("transformPrompt hook (+ sha256 blobs)", hook, base.row)
  const rows = [probe.row, base.row, frames.row, viaHook.row]
  printTable(
    ["step", "wall", "× decode", "ffmpeg CPU", "× decode", "ffmpeg peak RSS", "node peak RSS", "processes"],
    rows.map((r) => [
      r.name,
      `${(r.medianMs / 1000).toFixed(2)} s`,
      r === probe.row ? "" : `${r.ratio.toFixed(2)}×`,
      `${r.childCpuSeconds.toFixed(2)} s`,
      r === probe.row ? "" : `${r.cpuRatio.toFixed(2)}×`,
      `${r.childPeakMiB.toFixed(0)} MiB`,
      `${r.selfPeakMiB.toFixed(0)} MiB`,
      String(r.processes)
    ])
  )
  const k = frames.last
  process.stdout.write(
    `\nframes: ${k.frames.map((f) => `${f.timestamp} (${f.source})`).join(", ")}; ${k.sceneChanges} scene changes found; ` +
      `${(k.frames.reduce((n, f) => n + f.jpeg.length, 0) / 1024).toFixed(0)} KiB of JPEG\n` +
      `node maxRSS over the whole run (process.resourceUsage): ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB\n`
  )
  fs.mkdirSync(outDir, { recursive: true })
  const figures = {
    bench: "video",
    at: new Date().toISOString(),
    machine: { cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model.trim(), node: process.version },
    clip: { path: clipPath, ...metadata },
    runs: RUNS,
    rows,
    frames: k.frames.map((f) => ({ time: f.time, source: f.source, bytes: f.jpeg.length })),
    sceneChanges: k.sceneChanges
  }
  fs.writeFileSync(path.join(outDir, "video.json"), `${JSON.stringify(figures, null, 2)}\n`)
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  await run()
}
