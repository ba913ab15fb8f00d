/**
 * Commit and merge back one worker's change: `Worktrees.commit` + `Worktrees.merge` (hardened git,
 * `.git` pointer checks, the merge ledger) beside the same steps as plain git commands (`git add
 * -A`, `git commit`, `git merge --no-ff`), on a small repository, in the same run.
 *
 * Each cycle writes one new file in the worker's worktree, commits it and merges it into main.
 * Run with `pnpm bench worktree-merge` (or `npx tsx bench/worktree-merge.ts`). Figures also go
 * to `bench/out/worktree-merge.json`.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { Effect } from "effect"
import { Worktrees } from "../plugins/worktree/src/index.js"
import { fmtMs, median, printTable, writeFigures } from "./report.js"

export const description = "commit + merge of a worker's change through Worktrees (hardened git) vs plain git"

const CYCLES = Number(process.env.BENCH_MERGE_CYCLES ?? 20)

const git = (cwd: string, args: ReadonlyArray<string>) =>
  execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: "1", LC_ALL: "C" }
  })

/** CPU time of this process and its reaped children (the git processes), in ms. */
const cpuNow = (): number => {
  const own = process.cpuUsage()
  let children = 0
  try {
    const stat = fs.readFileSync("/proc/self/stat", "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    children = (Number(fields[13]) + Number(fields[14])) * 10
  } catch {
    // not Linux: own CPU only
  }
  return (own.user + own.system) / 1000 + children
}

const repoIn = (parent: string, name: string) => {
  const repo = path.join(parent, name)
  fs.mkdirSync(repo)
  git(repo, ["init", "-q", "-b", "main"])
  git(repo, ["config", "user.name", "Bench"])
  git(repo, ["config", "user.email", "bench@example.invalid"])
  for (let i = 0; i < 200; i++) fs.writeFileSync(path.join(repo, `f${i}.txt`), `file ${i}\n`)
  git(repo, ["add", "-A"])
  git(repo, ["commit", "-q", "-m", "init"])
  return repo
}

interface Sample {
  readonly wall: number
  readonly cpu: number
}

export const run = async (): Promise<void> => {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-merge-"))
  try {
    // the service: one worker, CYCLES commit + merge cycles
    const repoA = repoIn(parent, "service")
    const wt = await Effect.runPromise(Worktrees.make({ repo: repoA, sessionId: "bench" }))
    const a = await Effect.runPromise(wt.allocate({ agent: "worker-1" }))
    // plain git: a worktree of its own, the same cycles by hand
    const repoB = repoIn(parent, "plain")
    const plainTree = path.join(parent, "plain-worker")
    git(repoB, ["worktree", "add", "-q", "-b", "plain/worker-1", plainTree])

    const service: Array<Sample> = []
    const plain: Array<Sample> = []
    for (let i = 0; i < CYCLES; i++) {
      for (const side of i % 2 === 0 ? (["plain", "service"] as const) : (["service", "plain"] as const)) {
        const c0 = cpuNow()
        const t0 = performance.now()
        if (side === "service") {
          fs.writeFileSync(path.join(a.path, `w${i}.txt`), `work ${i}\n`)
          await Effect.runPromise(Effect.zipRight(wt.commit("worker-1", `work ${i}`), wt.merge("worker-1")))
        } else {
          fs.writeFileSync(path.join(plainTree, `w${i}.txt`), `work ${i}\n`)
          git(plainTree, ["add", "-A"])
          git(plainTree, ["commit", "-q", "--no-verify", "-m", `work ${i}`])
          git(repoB, ["merge", "-q", "--no-ff", "--no-edit", "plain/worker-1"])
        }
        ;(side === "service" ? service : plain).push({ wall: performance.now() - t0, cpu: cpuNow() - c0 })
      }
    }
    const row = (label: string, s: Array<Sample>) => ({
      label,
      wall: median(s.map((x) => x.wall)),
      cpu: median(s.map((x) => x.cpu))
    })
    const p = row("plain git (add, commit, merge)", plain)
    const w = row("Worktrees.commit + merge", service)
    process.stdout.write(
      `${CYCLES} cycles each, medians per cycle; load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}\n`
    )
    printTable(
      "commit + merge of one worker's change",
      ["", "wall", "cpu", "ratio (cpu)"],
      [
        [p.label, fmtMs(p.wall), fmtMs(p.cpu), "1.00×"],
        [w.label, fmtMs(w.wall), fmtMs(w.cpu), `${(w.cpu / p.cpu).toFixed(2)}×`]
      ]
    )
    writeFigures("worktree-merge", { cycles: CYCLES, plain: p, service: w })
  } finally {
    fs.rmSync(parent, { recursive: true, force: true })
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  await run()
}
