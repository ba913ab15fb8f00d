/**
 * Opening a page in the user's browser (`muse view --open`): `open` on macOS, `start` on Windows,
 * `xdg-open` elsewhere; when none can be started, the user is told where the page is.
 *
 * @example
 * ```ts
 * Open.inBrowser("/tmp/muse-20261204-035756-d41996.html", err)
 * ```
 */
import { spawn } from "node:child_process"
import type * as History from "../history.js"

const opener = (): { readonly cmd: string; readonly args: ReadonlyArray<string> } =>
  process.platform === "darwin"
    ? { cmd: "open", args: [] }
    : process.platform === "win32"
      ? { cmd: "cmd", args: ["/c", "start", '""'] }
      : { cmd: "xdg-open", args: [] }

/** Open `target` (a file or a URL) in the browser, without waiting for it. */
export const inBrowser = (target: string, err: History.Out): void => {
  const { cmd, args } = opener()
  const cannot = () => err.write(`could not start ${cmd} to open the page; open it yourself: ${target}\n`)
  try {
    const child = spawn(cmd, [...args, target], { stdio: "ignore", detached: true })
    child.on("error", cannot)
    child.unref()
  } catch {
    cannot()
  }
}
