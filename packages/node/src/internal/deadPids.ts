/**
 * Whether a process still runs, and the removal of what dead processes left in a folder (lock
 * temps, process-limit cgroups named after the pid that made them).
 *
 * @example
 * ```ts
 * pidAlive(process.pid) // true
 * removeLeftovers("/sys/fs/cgroup/pids", (name) => /^muse-(\d+)-\d+$/.exec(name)?.[1], (p) => fs.rmdirSync(p))
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"

/** The process runs (one we may not signal, `EPERM`, runs too). */
export const pidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * Remove each entry of `dir` whose name carries (`pidOf`) the pid of a process that no longer runs
 * (never this process's own); quiet when the folder or an entry is gone.
 */
export const removeLeftovers = (
  dir: string,
  pidOf: (name: string) => string | undefined,
  remove: (file: string) => void
): void => {
  let names: Array<string> = []
  try {
    names = fs.readdirSync(dir)
  } catch {
    return
  }
  for (const name of names) {
    const found = pidOf(name)
    if (found === undefined) continue
    const pid = Number(found)
    if (pid === process.pid || pidAlive(pid)) continue
    try {
      remove(path.join(dir, name))
    } catch {}
  }
}
