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
