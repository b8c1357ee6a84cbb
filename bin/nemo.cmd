@echo off
rem Launcher of `helm nemo` on Windows: the checkout's .venv, the plugin's venv, then helm-nemo on PATH.
rem (Helm runs install hooks through `sh -c` only, so on Windows build the venv by hand:
rem   py -3 -m venv "%HELM_PLUGIN_DIR%\venv" and pip install --no-index --find-links "%HELM_PLUGIN_DIR%\wheels" helm-nemo)
if exist "%HELM_PLUGIN_DIR%\.venv\Scripts\python.exe" (
  "%HELM_PLUGIN_DIR%\.venv\Scripts\python.exe" -m helm_nemo %*
  exit /b %ERRORLEVEL%
)
if exist "%HELM_PLUGIN_DIR%\venv\Scripts\python.exe" (
  "%HELM_PLUGIN_DIR%\venv\Scripts\python.exe" -m helm_nemo %*
  exit /b %ERRORLEVEL%
)
where helm-nemo >nul 2>nul
if %ERRORLEVEL%==0 (
  helm-nemo %*
  exit /b %ERRORLEVEL%
)
echo helm nemo: no Python environment found in %HELM_PLUGIN_DIR%. Build venv\ there (see bin\nemo.cmd) or "pip install helm-nemo". 1>&2
exit /b 2
