@echo off
rem Launcher of `helm nemo` on Windows: the project venv first, then helm-nemo on PATH.
if exist "%HELM_PLUGIN_DIR%\.venv\Scripts\python.exe" (
  "%HELM_PLUGIN_DIR%\.venv\Scripts\python.exe" -m helm_nemo %*
  exit /b %ERRORLEVEL%
)
where helm-nemo >nul 2>nul
if %ERRORLEVEL%==0 (
  helm-nemo %*
  exit /b %ERRORLEVEL%
)
echo helm nemo: no Python environment found. Run "make setup" in %HELM_PLUGIN_DIR% or "pip install helm-nemo". 1>&2
exit /b 2
