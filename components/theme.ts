/**
 * The theme choice shared by the inline script in app/layout.tsx (runs before the first paint) and the
 * header's switch. No choice stored means "follow the system" (prefers-color-scheme, in CSS).
 */
export const THEME_STORAGE_KEY = "lockscope.theme";

export type ThemeChoice = "system" | "light" | "dark";

/**
 * Sets `html[data-theme]` from the stored choice before the body paints, so a pinned theme never flashes the
 * other one. Kept tiny and free of interpolated input: it is the page's only inline script.
 */
export const THEME_SCRIPT = `try{var t=localStorage.getItem(${JSON.stringify(THEME_STORAGE_KEY)});if(t==="light"||t==="dark")document.documentElement.dataset.theme=t}catch(e){}`;
