/**
 * A real browser for the tests of `muse view`: Debian's chromium driven by playwright-core (no
 * browser download). A machine without it skips those tests, saying why. And the page's data read
 * back in Node, as the page itself inflates it.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as zlib from "node:zlib"
import type { Browser } from "playwright-core"

/** The chromium binary (`MUSE_TEST_CHROMIUM`, else `chromium` on PATH), or why there is none. */
export const chromium = (): { readonly path: string } | { readonly skip: string } => {
  const given = process.env.MUSE_TEST_CHROMIUM
  if (given) return fs.existsSync(given) ? { path: given } : { skip: `MUSE_TEST_CHROMIUM=${given} does not exist` }
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    for (const name of ["chromium", "chromium-browser"]) {
      const file = path.join(dir, name)
      if (dir !== "" && fs.existsSync(file)) return { path: file }
    }
  }
  return { skip: "no chromium on this machine (apt-get install chromium, or set MUSE_TEST_CHROMIUM)" }
}

export const launch = async (executablePath: string): Promise<Browser> => {
  const { chromium: pw } = await import("playwright-core")
  return pw.launch({
    executablePath,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run"
    ]
  })
}

/** Where tests keep what a person may want to look at afterwards (screenshots). */
export const artifactsDir = (): string => {
  const dir = path.resolve(
    process.env.MUSE_TEST_ARTIFACTS ?? path.join(import.meta.dirname, "..", "..", "..", "..", "test-artifacts")
  )
  fs.mkdirSync(dir, { recursive: true })
  return dir
}

const block = (html: string, id: string): string => {
  const m = new RegExp(`<script type="application/json" id="${id}">([^<]*)</script>`).exec(html)
  if (!m) throw new Error(`no ${id} block in the page`)
  return JSON.parse(m[1]!)
}

const inflate = (b64: string): any => JSON.parse(zlib.inflateRawSync(Buffer.from(b64, "base64")).toString("utf8"))

/** The summary a page draws (meta, lanes, marks, usage). */
export const summaryOf = (html: string): any => inflate(block(html, "summary"))

/** Every mark's details, in mark order. */
export const detailsOf = (html: string): Array<any> =>
  (block(html, "store") as unknown as Array<string>).flatMap(inflate)
