/**
 * Replace a file's content atomically: write a temporary file beside it, fsync, rename over the
 * target. A symlink (inside the workspace) is written through, not replaced; the mode of an existing
 * file is kept; missing parent directories are created.
 *
 * @example
 * ```ts
 * await writeFileAtomic("/ws/src/a.ts", "export {}\n")
 * ```
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"

/** The name of the temporary file an atomic write of `target` uses. */
export const tempNameRe = (base: string) =>
  new RegExp(`^\\.${base.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\.[0-9a-f]{8}\\.tmp$`)

/** Remove temporary files a killed atomic write of `abs` left beside it. */
export const removeLeftovers = async (abs: string): Promise<number> => {
  const dir = path.dirname(abs)
  const re = tempNameRe(path.basename(abs))
  let removed = 0
  let names: Array<string> = []
  try {
    names = await fs.readdir(dir)
  } catch {
    return 0
  }
  for (const name of names) {
    if (re.test(name) || name.startsWith(`${path.basename(abs)}.muse-restore-`)) {
      await fs.rm(path.join(dir, name), { force: true })
      removed++
    }
  }
  return removed
}

export const writeFileAtomic = async (abs: string, data: string | Buffer): Promise<void> => {
  let target = abs
  let mode: number | undefined
  try {
    target = await fs.realpath(abs)
    mode = (await fs.stat(target)).mode & 0o7777
  } catch {
    await fs.mkdir(path.dirname(abs), { recursive: true })
  }
  const tmp = path.join(path.dirname(target), `.${path.basename(target)}.${randomBytes(4).toString("hex")}.tmp`)
  const handle = await fs.open(tmp, "wx", mode ?? 0o666)
  try {
    try {
      await handle.writeFile(data)
      if (mode !== undefined) await handle.chmod(mode)
      await handle.sync()
    } finally {
      await handle.close()
    }
    await fs.rename(tmp, target)
  } catch (e) {
    await fs.rm(tmp, { force: true })
    throw e
  }
}
