/**
 * Worktree fan-out (`Worktrees.allocate`) against plain git on a generated 10k-file repository:
 *
 * - full checkouts for 1, 4 and 16 workers: all agents allocated at once through the service,
 *   beside the same number of plain sequential `git worktree add -b` commands;
 * - sparse checkouts (2 of 100 directories): the service with `paths`, beside plain sequential
 *   `git worktree add --no-checkout` + `git sparse-checkout set --no-cone` + `git checkout`.
 *
 * Each figure is the median of several runs; worktrees are removed (and `sync` run) between runs,
 * outside the timed part. Run with `pnpm bench worktree` or `npx tsx bench/worktree.ts`.
 * Figures also go to `bench/out/worktree.json`.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { Effect } from "effect"
import { Worktrees } from "../plugins/worktree/src/index.js"
import { fmtMs, median, printTable, writeFigures } from "./report.js"

export const description = "fan-out setup of 1/4/16 git worktrees (full and sparse) vs plain git worktree add"

const FILES = Number(process.env.BENCH_WORKTREE_FILES ?? 10_000)
const RUNS = Number(process.env.BENCH_WORKTREE_RUNS ?? 3)
const COUNTS = [1, 4, 16] as const
const SPARSE = ["/src/d007/", "/src/d042/"]

const git = (cwd: string, args: ReadonlyArray<string>, input?: string) =>
  execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    input,
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", LC_ALL: "C" }
  })

const syncDisk = () => {
  try {
    execFileSync("sync")
  } catch {
    // not available: the figures are just noisier
  }
}

/** A repository of `FILES` small TypeScript files in 100 directories, committed on main. */
const generateRepo = (parent: string): string => {
  const repo = path.join(parent, "big")
  fs.mkdirSync(repo)
  git(repo, ["init", "-q", "-b", "main"])
  git(repo, ["config", "user.name", "Bench"])
  git(repo, ["config", "user.email", "bench@example.invalid"])
  for (let i = 0; i < FILES; i++) {
    const dir = path.join(repo, "src", `d${String(i % 100).padStart(3, "0")}`)
    if (i < 100) fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(
      path.join(dir, `file${i}.ts`),
      `export const value${i} = ${i}\nexport function f${i}(x: number) {\n  return x + value${i}\n}\n`
    )
  }
  fs.writeFileSync(path.join(repo, "README.md"), "# bench\n")
  git(repo, ["add", "-A"])
  git(repo, ["commit", "-q", "-m", "10k files"])
  // a real repository is mostly packed
  git(repo, ["repack", "-a", "-d", "-q"])
  git(repo, ["prune-packed"])
  return repo
}

/**
 * CPU time used so far by this process and its reaped children (the git processes), in ms. CPU
 * time is much less sensitive than wall time to other load on the machine.
 */
const cpuNow = (): number => {
  const own = process.cpuUsage()
  let children = 0
  try {
    // fields after the command name: ... utime stime cutime cstime (14-17), in clock ticks
    const stat = fs.readFileSync("/proc/self/stat", "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    children = (Number(fields[13]) + Number(fields[14])) * 10
  } catch {
    // not Linux: own CPU only
  }
  return (own.user + own.system) / 1000 + children
}

interface Sample {
  readonly wall: number
  readonly cpu: number
}

const time = async (f: () => Promise<unknown> | unknown): Promise<Sample> => {
  const c0 = cpuNow()
  const t0 = performance.now()
  await f()
  return { wall: performance.now() - t0, cpu: cpuNow() - c0 }
}

let sessionCounter = 0

/** One timed fan-out through the service; removes everything afterwards (untimed). */
const serviceRun = async (repo: string, n: number, sparse: boolean): Promise<Sample> => {
  const service = await Effect.runPromise(Worktrees.make({ repo, sessionId: `bench-${++sessionCounter}` }))
  const agents = Array.from({ length: n }, (_, i) => `worker-${i + 1}`)
  const ms = await time(() =>
    Effect.runPromise(
      Effect.forEach(agents, (agent) => service.allocate(sparse ? { agent, paths: SPARSE } : { agent }), {
        concurrency: "unbounded"
      })
    )
  )
  await Effect.runPromise(service.cleanup())
  syncDisk()
  return ms
}

/** The same fan-out as plain sequential git commands; removes everything afterwards (untimed). */
const plainRun = async (repo: string, root: string, n: number, sparse: boolean): Promise<Sample> => {
  const id = ++sessionCounter
  const made: Array<{ p: string; b: string }> = Array.from({ length: n }, (_, i) => ({
    p: path.join(root, `plain-${id}`, `worker-${i + 1}`),
    b: `plain/${id}/worker-${i + 1}`
  }))
  const ms = await time(() => {
    for (const { p, b } of made) {
      if (sparse) {
        git(repo, ["worktree", "add", "-q", "--no-checkout", "-b", b, p, "HEAD"])
        git(p, ["sparse-checkout", "set", "--no-cone", ...SPARSE])
        git(p, ["checkout", "-q"])
      } else git(repo, ["worktree", "add", "-q", "-b", b, p, "HEAD"])
    }
  })
  for (const { p } of made) git(repo, ["worktree", "remove", "--force", p])
  git(repo, ["branch", "-D", "-q", ...made.map((m) => m.b)])
  git(repo, ["worktree", "prune"])
  fs.rmSync(path.join(root, `plain-${id}`), { recursive: true, force: true })
  syncDisk()
  return ms
}

type Variant = "plainFull" | "serviceFull" | "plainSparse" | "serviceSparse"

const labels: Record<Variant, string> = {
  plainFull: "plain git full",
  serviceFull: "Worktrees full",
  plainSparse: "plain git sparse",
  serviceSparse: "Worktrees sparse"
}

interface Row {
  readonly workers: number
  /** Median wall and CPU time (ms) per variant. */
  readonly wall: Record<Variant, number>
  readonly cpu: Record<Variant, number>
}

export const run = async (): Promise<void> => {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-worktree-"))
  try {
    const t0 = performance.now()
    const repo = generateRepo(parent)
    const genMs = performance.now() - t0
    const root = path.join(parent, "plain")
    process.stdout.write(
      `repository: ${FILES} files, generated, committed and packed in ${fmtMs(genMs)}; ${git(repo, ["--version"]).trim()}; ` +
        `median of ${RUNS} runs; load average ${os
          .loadavg()
          .map((l) => l.toFixed(1))
          .join(" ")}\n`
    )
    // warm the object store and the page cache once
    await plainRun(repo, root, 1, false)
    await serviceRun(repo, 1, false)

    const runners: Record<Variant, (n: number) => Promise<Sample>> = {
      plainFull: (n) => plainRun(repo, root, n, false),
      serviceFull: (n) => serviceRun(repo, n, false),
      plainSparse: (n) => plainRun(repo, root, n, true),
      serviceSparse: (n) => serviceRun(repo, n, true)
    }
    const rows: Array<Row> = []
    for (const n of COUNTS) {
      const samples: Record<Variant, Array<Sample>> = {
        plainFull: [],
        serviceFull: [],
        plainSparse: [],
        serviceSparse: []
      }
      for (let r = 0; r < RUNS; r++) {
        // alternate the order so neither side always goes first
        const order: Array<Variant> =
          r % 2 === 0
            ? ["plainFull", "serviceFull", "plainSparse", "serviceSparse"]
            : ["serviceFull", "plainFull", "serviceSparse", "plainSparse"]
        for (const v of order) {
          const sample = await runners[v](n)
          samples[v].push(sample)
          process.stderr.write(`  ${labels[v]} x${n}: ${fmtMs(sample.wall)} wall, ${fmtMs(sample.cpu)} cpu\n`)
        }
      }
      const pick = (f: (s: Sample) => number) =>
        Object.fromEntries(
          (Object.keys(samples) as Array<Variant>).map((v) => [v, median(samples[v].map(f))])
        ) as Record<Variant, number>
      rows.push({ workers: n, wall: pick((s) => s.wall), cpu: pick((s) => s.cpu) })
    }

    const x = (r: number) => `${r.toFixed(2)}x`
    printTable(
      `Fan-out setup, ${FILES}-file repository, median wall time (sparse: ${SPARSE.length} of 100 directories)`,
      [
        "workers",
        "plain git full",
        "Worktrees full",
        "ratio",
        "plain git sparse",
        "Worktrees sparse",
        "ratio",
        "sparse vs full"
      ],
      rows.map((r) => [
        String(r.workers),
        fmtMs(r.wall.plainFull),
        fmtMs(r.wall.serviceFull),
        x(r.wall.serviceFull / r.wall.plainFull),
        fmtMs(r.wall.plainSparse),
        fmtMs(r.wall.serviceSparse),
        x(r.wall.serviceSparse / r.wall.plainSparse),
        x(r.wall.serviceSparse / r.wall.serviceFull)
      ])
    )
    printTable(
      "Same runs, median CPU time (this process + its git children)",
      ["workers", "plain git full", "Worktrees full", "ratio", "plain git sparse", "Worktrees sparse", "ratio"],
      rows.map((r) => [
        String(r.workers),
        fmtMs(r.cpu.plainFull),
        fmtMs(r.cpu.serviceFull),
        x(r.cpu.serviceFull / r.cpu.plainFull),
        fmtMs(r.cpu.plainSparse),
        fmtMs(r.cpu.serviceSparse),
        x(r.cpu.serviceSparse / r.cpu.plainSparse)
      ])
    )
    const out = writeFigures("worktree", {
      files: FILES,
      runs: RUNS,
      sparsePaths: SPARSE,
      loadAverage: os.loadavg(),
      rows: rows.map((r) => ({
        ...r,
        fullRatio: r.wall.serviceFull / r.wall.plainFull,
        fullCpuRatio: r.cpu.serviceFull / r.cpu.plainFull,
        sparseRatio: r.wall.serviceSparse / r.wall.plainSparse,
        sparseVsFull: r.wall.serviceSparse / r.wall.serviceFull
      }))
    })
    process.stdout.write(`\nfigures: ${out}\n`)
  } finally {
    fs.rmSync(parent, { recursive: true, force: true })
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  await run()
}
