/** Width and height from a JPEG's start-of-frame marker, or undefined when there is none. */
export const jpegSize = (bytes: Uint8Array): { readonly width: number; readonly height: number } | undefined => {
  if (bytes[0] !== 0xff || bytes[1] !== 0xd8) return undefined
  let i = 2
  while (i + 9 < bytes.length) {
    if (bytes[i] !== 0xff) return undefined
    const marker = bytes[i + 1]!
    if (marker === 0xff) {
      i++
      continue
    }
    const length = (bytes[i + 2]! << 8) | bytes[i + 3]!
    // SOF0..SOF15 except DHT (c4), JPG (c8) and DAC (cc)
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { height: (bytes[i + 5]! << 8) | bytes[i + 6]!, width: (bytes[i + 7]! << 8) | bytes[i + 8]! }
    }
    i += 2 + length
  }
  return undefined
}
